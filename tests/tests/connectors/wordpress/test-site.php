<?php
/**
 * The test site's must-use plugin: it renders every front-end page as the journey's test
 * origin does ("site page <path>"), after the Queue Manager plugin's door (priority 1) and
 * before WordPress's canonical redirects (priority 10); it lets a second `php -S` serve the
 * same database as another site (QM_WP_ROOM, QM_WP_FAIL_MODE override the plugin's settings);
 * and it keeps WordPress from sending mail.
 */
add_action(
	'template_redirect',
	function () {
		status_header( 200 );
		header( 'Content-Type: text/plain; charset=utf-8' );
		echo 'site page ' . parse_url( wp_unslash( $_SERVER['REQUEST_URI'] ), PHP_URL_PATH );
		exit;
	},
	5
);

add_filter(
	'option_queue_manager_settings',
	function ( $settings ) {
		$settings = is_array( $settings ) ? $settings : array();
		foreach ( array( 'room_id' => 'QM_WP_ROOM', 'fail_mode' => 'QM_WP_FAIL_MODE', 'server' => 'QM_WP_SERVER' ) as $field => $variable ) {
			if ( false !== getenv( $variable ) && '' !== getenv( $variable ) ) {
				$settings[ $field ] = getenv( $variable );
			}
		}
		return $settings;
	}
);

add_filter( 'pre_wp_mail', '__return_true' );
