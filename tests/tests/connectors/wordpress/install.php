<?php
// Installs the test's WordPress from the command line: a fresh database, wp_install(), pretty
// permalinks, the Queue Manager plugin activated and configured. Run as
// `php install.php <docroot>` with the QM_WP_* environment of wp-config.php, plus
// QM_WP_SERVER, QM_WP_ROOM_ID, QM_WP_API_KEY for the plugin's settings.
$qm_root = $argv[1];
$qm_db   = getenv( 'QM_WP_DB' );
list( $qm_host, $qm_port ) = explode( ':', getenv( 'QM_WP_DB_HOST' ) );
mysqli_report( MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT );
$qm_mysql = new mysqli( $qm_host, 'root', '', '', (int) $qm_port );
$qm_mysql->query( 'CREATE DATABASE `' . $qm_db . '` CHARACTER SET utf8mb4' );
$qm_mysql->close();
mysqli_report( MYSQLI_REPORT_OFF );

$qm_home                    = parse_url( getenv( 'QM_WP_HOME' ) );
$_SERVER['HTTP_HOST']       = $qm_home['host'] . ':' . $qm_home['port'];
$_SERVER['SERVER_NAME']     = $qm_home['host'];
$_SERVER['SERVER_PORT']     = $qm_home['port'];
$_SERVER['REQUEST_URI']     = '/';
$_SERVER['REQUEST_METHOD']  = 'GET';
define( 'ABSPATH', $qm_root . '/' );
define( 'WP_INSTALLING', true );
require ABSPATH . 'wp-load.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';
require_once ABSPATH . 'wp-admin/includes/plugin.php';

$qm_installed = wp_install( 'Queue Manager test shop', 'admin', 'admin@example.invalid', false, '', getenv( 'QM_WP_ADMIN_PASSWORD' ) );
if ( empty( $qm_installed['user_id'] ) ) {
	fwrite( STDERR, "wp_install failed\n" );
	exit( 1 );
}
update_option( 'permalink_structure', '/%postname%/' );
update_option(
	'queue_manager_settings',
	array(
		'server'    => getenv( 'QM_WP_SERVER' ),
		'room_id'   => getenv( 'QM_WP_ROOM_ID' ),
		'api_key'   => getenv( 'QM_WP_API_KEY' ),
		'fail_mode' => 'open',
	)
);
$qm_activated = activate_plugin( 'queue-manager/queue-manager.php' );
if ( is_wp_error( $qm_activated ) ) {
	fwrite( STDERR, 'activate_plugin: ' . $qm_activated->get_error_message() . "\n" );
	exit( 1 );
}
echo "installed\n";
