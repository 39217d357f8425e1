<?php
// The router of `php -S` for the test's WordPress: a .php file under the docroot runs as
// itself (wp-login.php, wp-admin/…), any other existing file is served as it is, and every
// other path goes to WordPress's front controller, as Apache's or nginx's rewrite would, so
// /shop/item is a front-end request. ABSPATH names this directory (the test's docroot, whose
// entries link to Debian's /usr/share/wordpress) so wp-load.php reads the test's wp-config.php,
// not Debian's, which would look in /etc/wordpress.
define( 'ABSPATH', __DIR__ . '/' );

$qm_path = (string) parse_url( $_SERVER['REQUEST_URI'], PHP_URL_PATH );
$qm_file = realpath( __DIR__ . $qm_path );
if ( false !== $qm_file && is_dir( $qm_file ) && is_file( $qm_file . '/index.php' ) ) {
	$qm_path = rtrim( $qm_path, '/' ) . '/index.php';
	$qm_file = $qm_file . '/index.php';
}
if ( false !== $qm_file && is_file( $qm_file ) && '/' !== $qm_path ) {
	if ( '.php' !== substr( $qm_file, -4 ) ) {
		return false;
	}
} else {
	$qm_path = '/index.php';
	$qm_file = __DIR__ . '/index.php';
}
$_SERVER['SCRIPT_NAME']     = $qm_path;
$_SERVER['PHP_SELF']        = $qm_path;
$_SERVER['SCRIPT_FILENAME'] = __DIR__ . $qm_path;
chdir( dirname( $qm_file ) );
require $qm_file;
