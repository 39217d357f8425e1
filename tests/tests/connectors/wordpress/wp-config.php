<?php
// The test's WordPress configuration: its own database and content directory, the site's
// address from the environment (each `php -S` of the test is one site), and no network but
// loopback (WP_HTTP_BLOCK_EXTERNAL allows only the site's own host, 127.0.0.1).
define( 'DB_NAME', getenv( 'QM_WP_DB' ) );
define( 'DB_USER', 'root' );
define( 'DB_PASSWORD', '' );
define( 'DB_HOST', getenv( 'QM_WP_DB_HOST' ) );
define( 'DB_CHARSET', 'utf8mb4' );
define( 'DB_COLLATE', '' );
define( 'WP_HOME', getenv( 'QM_WP_HOME' ) );
define( 'WP_SITEURL', getenv( 'QM_WP_HOME' ) );
define( 'WP_CONTENT_DIR', __DIR__ . '/wp-content' );
define( 'WP_CONTENT_URL', getenv( 'QM_WP_HOME' ) . '/wp-content' );
define( 'WP_HTTP_BLOCK_EXTERNAL', true );
define( 'DISABLE_WP_CRON', true );
define( 'AUTOMATIC_UPDATER_DISABLED', true );
define( 'WP_AUTO_UPDATE_CORE', false );
define( 'WP_DEBUG', true );
define( 'WP_DEBUG_DISPLAY', false );
define( 'WP_DEBUG_LOG', __DIR__ . '/debug.log' );
foreach ( array( 'AUTH', 'SECURE_AUTH', 'LOGGED_IN', 'NONCE' ) as $qm_scheme ) {
	define( $qm_scheme . '_KEY', 'test-' . $qm_scheme . '-key-' . DB_NAME );
	define( $qm_scheme . '_SALT', 'test-' . $qm_scheme . '-salt-' . DB_NAME );
}
$table_prefix = 'wp_';
require_once ABSPATH . 'wp-settings.php';
