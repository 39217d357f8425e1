<?php
/**
 * Runs when the plugin is deleted (Plugins → Delete): removes everything it kept in the
 * database, the settings (with the API key) and its cached answers. Visitors' qm_dk_ cookies
 * are session cookies on their browsers and end with the browser session.
 */

if ( ! defined( 'WP_UNINSTALL_PLUGIN' ) ) {
	exit;
}

delete_option( 'queue_manager_settings' );
delete_transient( 'queue_manager_update' );
delete_option( 'queue_manager_legacy_check' );
delete_transient( 'queue_manager_logged_down' );
