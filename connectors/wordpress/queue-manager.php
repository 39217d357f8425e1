<?php
/**
 * Plugin Name:       Queue Manager
 * Description:       Sends visitors of the pages a Queue Manager room protects through its waiting room, and lets them in once the room admits them.
 * Version:           1.0.0
 * Requires at least: 5.6
 * Requires PHP:      7.3
 * License:           Apache-2.0
 * Text Domain:       queue-manager
 *
 * The door: on every front-end page (never wp-admin, wp-login, REST, cron or AJAX) the plugin
 * asks the queue server's door check, GET {server}/api/v1/check, whether this visitor may see
 * the page, vouching for the visitor with ip= and agent= and the server's Public API key, and
 * acts on the answer as INTEGRATION.md's connector protocol says. The settings screen and the
 * updater live in includes/.
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/** The plugin's version: sent on the install check and compared with the registry's. */
const QUEUE_MANAGER_VERSION = '1.0.0';
/** The one option holding the settings (server, room_id, api_key, fail_mode). */
const QUEUE_MANAGER_OPTION = 'queue_manager_settings';
/** How long the door check may take before the plugin treats the server as down (seconds). */
const QUEUE_MANAGER_TIMEOUT = 2;
/** The query parameter the waiting page returns a passed visitor with. */
const QUEUE_MANAGER_TOKEN_PARAM = 'qm_token';
/**
 * When the server last answered 404 at /api/v1/check (a server older than the prefix): for a
 * day after, checks go to /api/check. An autoloaded option, created at activation, so reading
 * it on every page costs no query.
 */
const QUEUE_MANAGER_LEGACY_OPTION = 'queue_manager_legacy_check';

define( 'QUEUE_MANAGER_FILE', __FILE__ );

require_once __DIR__ . '/includes/settings.php';
require_once __DIR__ . '/includes/updates.php';

/**
 * The saved settings, with defaults for what is unset.
 *
 * @return array{server: string, room_id: string, api_key: string, fail_mode: string}
 */
function queue_manager_settings() {
	$saved = get_option( QUEUE_MANAGER_OPTION, array() );
	if ( ! is_array( $saved ) ) {
		$saved = array();
	}
	$settings = array_merge(
		array(
			'server'    => '',
			'room_id'   => '',
			'api_key'   => '',
			'fail_mode' => 'open',
		),
		$saved
	);
	$settings['server'] = untrailingslashit( (string) $settings['server'] );
	return $settings;
}

/**
 * Whether a door-session key has the server's shape (16–128 of A–Z a–z 0–9 _ -): anything else
 * is never stored nor sent, so a tampered cookie cannot reach the server.
 */
function queue_manager_is_session_key( $key ) {
	return is_string( $key ) && 1 === preg_match( '/^[A-Za-z0-9_-]{16,128}$/', $key );
}

/** A room id as the server accepts it; it also names the cookie, so it must be cookie-safe. */
function queue_manager_is_room_id( $room_id ) {
	return is_string( $room_id ) && 1 === preg_match( '/^[A-Za-z0-9_-]{1,64}$/', $room_id );
}

/**
 * `$query` without the `qm_token` parameter, every other parameter kept exactly as sent (no
 * re-encoding, same order), so the clean URL is the one the visitor asked for.
 */
function queue_manager_strip_token( $query ) {
	$kept = array();
	foreach ( explode( '&', (string) $query ) as $pair ) {
		if ( '' === $pair ) {
			continue;
		}
		$name = rawurldecode( strstr( $pair . '=', '=', true ) );
		if ( QUEUE_MANAGER_TOKEN_PARAM !== $name ) {
			$kept[] = $pair;
		}
	}
	return implode( '&', $kept );
}

/**
 * The page as the visitor asked for it, without `qm_token`. The origin comes from the site's
 * own home URL, not the Host header, so a forged Host cannot name another site to the server.
 */
function queue_manager_current_url() {
	$home   = wp_parse_url( home_url() );
	$scheme = is_ssl() ? 'https' : ( isset( $home['scheme'] ) ? $home['scheme'] : 'http' );
	$origin = $scheme . '://' . ( isset( $home['host'] ) ? $home['host'] : 'localhost' );
	if ( isset( $home['port'] ) ) {
		$origin .= ':' . $home['port'];
	}
	$request_uri = isset( $_SERVER['REQUEST_URI'] ) ? wp_unslash( (string) $_SERVER['REQUEST_URI'] ) : '/';
	$parts       = explode( '?', $request_uri, 2 );
	$path        = '' === $parts[0] ? '/' : $parts[0];
	$query       = isset( $parts[1] ) ? queue_manager_strip_token( $parts[1] ) : '';
	return $origin . $path . ( '' === $query ? '' : '?' . $query );
}

/** The `qm_token` the waiting page sent the visitor back with, if any. */
function queue_manager_returned_token() {
	// phpcs:ignore WordPress.Security.NonceVerification.Recommended -- a pass, not a form.
	if ( ! isset( $_GET[ QUEUE_MANAGER_TOKEN_PARAM ] ) || ! is_string( $_GET[ QUEUE_MANAGER_TOKEN_PARAM ] ) ) {
		return '';
	}
	// phpcs:ignore WordPress.Security.NonceVerification.Recommended
	$token = wp_unslash( $_GET[ QUEUE_MANAGER_TOKEN_PARAM ] );
	// A token is base64url "." base64url; anything else is not worth a round trip.
	return 1 === preg_match( '/^[A-Za-z0-9_.-]{1,2048}$/', $token ) ? $token : '';
}

/** The name of the cookie that keeps the door-session key for `$room_id`. */
function queue_manager_cookie_name( $room_id ) {
	return 'qm_dk_' . $room_id;
}

/** The door-session key the visitor's cookie holds, if it is one. */
function queue_manager_stored_key( $room_id ) {
	$name = queue_manager_cookie_name( $room_id );
	if ( ! isset( $_COOKIE[ $name ] ) || ! is_string( $_COOKIE[ $name ] ) ) {
		return '';
	}
	$key = wp_unslash( $_COOKIE[ $name ] );
	return queue_manager_is_session_key( $key ) ? $key : '';
}

/**
 * Keeps the key in an HttpOnly cookie for the whole site (SameSite=Lax, Secure on https), for
 * the browser session: no script on the site can read it.
 */
function queue_manager_store_key( $room_id, $key ) {
	setcookie(
		queue_manager_cookie_name( $room_id ),
		$key,
		array(
			'expires'  => 0,
			'path'     => '/',
			'secure'   => is_ssl(),
			'httponly' => true,
			'samesite' => 'Lax',
		)
	);
}

/** Expires the key's cookie (PHP sends it with Max-Age=0). */
function queue_manager_drop_key( $room_id ) {
	setcookie(
		queue_manager_cookie_name( $room_id ),
		'',
		array(
			'expires'  => 1,
			'path'     => '/',
			'secure'   => is_ssl(),
			'httponly' => true,
			'samesite' => 'Lax',
		)
	);
}

/**
 * Logs that the queue server could not answer, at most once a minute, so an outage does not
 * flood the PHP error log with one line per page view.
 */
function queue_manager_log_down( $why ) {
	if ( get_transient( 'queue_manager_logged_down' ) ) {
		return;
	}
	set_transient( 'queue_manager_logged_down', 1, MINUTE_IN_SECONDS );
	// phpcs:ignore WordPress.PHP.DevelopmentFunctions.error_log_error_log
	error_log( 'queue manager: the door check failed (' . $why . '); serving by the fail mode' );
}

/**
 * One door check. Returns the decoded answer (`action` is "pass" or "queue"), or a WP_Error
 * when the server could not answer: refused, timed out, 5xx, a refusal or not JSON.
 *
 * @param array  $settings The plugin's settings.
 * @param array  $params   The query beyond roomId/ip/agent (url, token).
 * @param string $key      The door-session key to present ('' for none).
 * @return array|WP_Error
 */
function queue_manager_ask( array $settings, array $params, $key ) {
	$query = array_merge(
		array(
			'roomId' => $settings['room_id'],
			'ip'     => isset( $_SERVER['REMOTE_ADDR'] ) ? (string) $_SERVER['REMOTE_ADDR'] : '',
			'agent'  => isset( $_SERVER['HTTP_USER_AGENT'] ) ? wp_unslash( (string) $_SERVER['HTTP_USER_AGENT'] ) : '',
		),
		$params
	);
	$headers = array(
		'Authorization' => 'Bearer ' . $settings['api_key'],
		'Accept'        => 'application/json',
	);
	if ( '' !== $key ) {
		// The header keeps the key out of URLs and access logs.
		$headers['X-QM-Session'] = $key;
	}
	$request = array(
		'timeout'     => QUEUE_MANAGER_TIMEOUT,
		'redirection' => 0,
		'headers'     => $headers,
		'user-agent'  => 'queue-manager-wordpress/' . QUEUE_MANAGER_VERSION,
	);

	$legacy = time() - (int) get_option( QUEUE_MANAGER_LEGACY_OPTION, 0 ) < DAY_IN_SECONDS;
	$path   = $legacy ? '/api/check' : '/api/v1/check';
	$answer = wp_remote_get( $settings['server'] . $path . '?' . http_build_query( $query, '', '&', PHP_QUERY_RFC3986 ), $request );
	if ( is_wp_error( $answer ) ) {
		return $answer;
	}
	$status = (int) wp_remote_retrieve_response_code( $answer );
	$body   = json_decode( wp_remote_retrieve_body( $answer ), true );

	// A server older than the /api/v1 prefix answers its own 404 (not one of its {error, code}
	// bodies): ask the unprefixed route, and remember that for a day.
	if ( ! $legacy && 404 === $status && ! ( is_array( $body ) && isset( $body['code'] ) ) ) {
		update_option( QUEUE_MANAGER_LEGACY_OPTION, time(), true );
		$answer = wp_remote_get( $settings['server'] . '/api/check?' . http_build_query( $query, '', '&', PHP_QUERY_RFC3986 ), $request );
		if ( is_wp_error( $answer ) ) {
			return $answer;
		}
		$status = (int) wp_remote_retrieve_response_code( $answer );
		$body   = json_decode( wp_remote_retrieve_body( $answer ), true );
	}

	if ( 200 === $status && is_array( $body ) && isset( $body['action'] ) && in_array( $body['action'], array( 'pass', 'queue' ), true ) ) {
		return $body;
	}
	$code = is_array( $body ) && isset( $body['code'] ) && is_string( $body['code'] ) ? $body['code'] : 'not_json';
	return new WP_Error( 'queue_manager_check', 'status ' . $status . ' ' . $code, array( 'code' => $code ) );
}

/** Sends the visitor to `$location` (302, never cached) and ends the request. */
function queue_manager_redirect( $location ) {
	nocache_headers();
	// The journey of a visitor depends on them alone: no cache may keep this answer.
	header( 'Cache-Control: no-store' );
	wp_redirect( $location, 302, 'Queue Manager' );
	exit;
}

/** The waiting page for an answer, absolute, asked to send the visitor back to `$page`. */
function queue_manager_waiting_url( array $settings, array $answer, $page ) {
	$waiting = isset( $answer['waitingRoomUrl'] ) && is_string( $answer['waitingRoomUrl'] ) && '' !== $answer['waitingRoomUrl']
		? $answer['waitingRoomUrl']
		: '/w/' . rawurlencode( $settings['room_id'] );
	if ( ! preg_match( '#^https?://#i', $waiting ) ) {
		$waiting = $settings['server'] . '/' . ltrim( $waiting, '/' );
	}
	$separator = false === strpos( $waiting, '?' ) ? '?' : '&';
	return $waiting . $separator . 'qm_return=' . rawurlencode( $page );
}

/** The server cannot answer: serve the page (fail open) or a short 503 (fail closed). */
function queue_manager_fail( array $settings, WP_Error $error ) {
	queue_manager_log_down( $error->get_error_message() );
	if ( 'closed' !== $settings['fail_mode'] ) {
		return;
	}
	nocache_headers();
	header( 'Cache-Control: no-store' );
	header( 'Retry-After: 30' );
	status_header( 503 );
	header( 'Content-Type: text/html; charset=utf-8' );
	echo '<!doctype html><meta charset="utf-8"><title>' . esc_html__( 'Please try again shortly', 'queue-manager' ) . '</title>'
		. '<h1>' . esc_html__( 'Please try again shortly', 'queue-manager' ) . '</h1>'
		. '<p>' . esc_html__( 'This page is busy. Please reload it in a minute.', 'queue-manager' ) . '</p>';
	exit;
}

/**
 * The door, on every front-end page before any output: ask, then serve, redirect or refuse.
 * Hooked on template_redirect, which WordPress fires for theme pages only (not for wp-admin,
 * wp-login.php, the REST API, cron or admin-ajax.php), and at priority 1 so it answers before
 * canonical redirects and before any plugin starts output.
 */
function queue_manager_door() {
	if ( is_admin() || wp_doing_ajax() || wp_doing_cron() || ( defined( 'REST_REQUEST' ) && REST_REQUEST ) || ( defined( 'WP_CLI' ) && WP_CLI ) ) {
		return;
	}
	// Crawlers' robots.txt and the browser's favicon are never a visitor's page.
	if ( is_robots() || ( function_exists( 'is_favicon' ) && is_favicon() ) ) {
		return;
	}
	$settings = queue_manager_settings();
	if ( '' === $settings['server'] || ! queue_manager_is_room_id( $settings['room_id'] ) ) {
		return; // Not configured yet: protect nothing rather than guess.
	}
	$room  = $settings['room_id'];
	$page  = queue_manager_current_url();
	$token = queue_manager_returned_token();
	$key   = '' === $token ? queue_manager_stored_key( $room ) : '';

	$params = array( 'url' => $page );
	if ( '' !== $token ) {
		$params['token'] = $token;
	}
	$answer = queue_manager_ask( $settings, $params, $key );
	if ( is_wp_error( $answer ) && '' !== $key && 'invalid_session' === ( $answer->get_error_data()['code'] ?? '' ) ) {
		// A key the server will never accept: drop it and ask as a visitor without one.
		queue_manager_drop_key( $room );
		$key    = '';
		$answer = queue_manager_ask( $settings, $params, '' );
	}
	if ( is_wp_error( $answer ) ) {
		queue_manager_fail( $settings, $answer );
		return;
	}

	if ( 'queue' === $answer['action'] ) {
		if ( ! empty( $answer['clearToken'] ) ) {
			queue_manager_drop_key( $room );
		}
		queue_manager_redirect( queue_manager_waiting_url( $settings, $answer, $page ) );
	}

	// A pass. A page the room protects was served to this visitor alone: page caches that
	// honour DONOTCACHEPAGE (WP Super Cache, W3 Total Cache, WP Rocket…) must not keep it for
	// the next visitor, who has not been let in.
	$reason = isset( $answer['reason'] ) ? $answer['reason'] : '';
	if ( ! in_array( $reason, array( 'out_of_scope', 'no_room' ), true ) && ! defined( 'DONOTCACHEPAGE' ) ) {
		define( 'DONOTCACHEPAGE', true );
	}
	if ( isset( $answer['sess'] ) && queue_manager_is_session_key( $answer['sess'] ) ) {
		queue_manager_store_key( $room, $answer['sess'] );
	}
	if ( '' !== $token ) {
		// The pass is spent: take it out of the address bar (and of any link copied from it).
		queue_manager_redirect( $page );
	}
}
add_action( 'template_redirect', 'queue_manager_door', 1 );

/** Creates the autoloaded options the door reads on every page. */
function queue_manager_activate() {
	add_option( QUEUE_MANAGER_LEGACY_OPTION, 0, '', 'yes' );
}
register_activation_hook( QUEUE_MANAGER_FILE, 'queue_manager_activate' );
