<?php
/**
 * Updates from the queue server instead of WordPress.org: the server's registry answers
 * GET {server}/api/connectors/wordpress/update in the plugin updater's shape, and this file
 * offers that version on Dashboard → Updates when it is newer, shows its details in the
 * "View details" box, and checks the downloaded zip against the registry's SHA-256 before
 * WordPress installs it.
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/** The plugin's slug on the registry (and its folder). */
const QUEUE_MANAGER_SLUG = 'queue-manager';
/** Caches the registry's answer: WordPress asks for updates many times on one admin visit. */
const QUEUE_MANAGER_UPDATE_TRANSIENT = 'queue_manager_update';

/**
 * The registry's latest release, or null when it cannot be read (no server set, unreachable,
 * or not the updater shape). Cached for an hour either way, so a down server is not asked on
 * every admin page.
 *
 * @return array|null
 */
function queue_manager_release() {
	$cached = get_transient( QUEUE_MANAGER_UPDATE_TRANSIENT );
	if ( is_array( $cached ) ) {
		return empty( $cached['new_version'] ) ? null : $cached;
	}
	$settings = queue_manager_settings();
	if ( '' === $settings['server'] ) {
		return null;
	}
	$answer  = wp_remote_get(
		$settings['server'] . '/api/connectors/wordpress/update',
		array(
			'timeout'     => 5,
			'redirection' => 0,
			'headers'     => array( 'Accept' => 'application/json' ),
			'user-agent'  => 'queue-manager-wordpress/' . QUEUE_MANAGER_VERSION,
		)
	);
	$release = is_wp_error( $answer ) || 200 !== (int) wp_remote_retrieve_response_code( $answer )
		? null
		: json_decode( wp_remote_retrieve_body( $answer ), true );
	if ( ! is_array( $release ) || empty( $release['new_version'] ) || ! is_string( $release['new_version'] ) ) {
		set_transient( QUEUE_MANAGER_UPDATE_TRANSIENT, array(), HOUR_IN_SECONDS );
		return null;
	}
	set_transient( QUEUE_MANAGER_UPDATE_TRANSIENT, $release, HOUR_IN_SECONDS );
	return $release;
}

/** A string field of the release, '' when absent. */
function queue_manager_release_field( array $release, $name ) {
	return isset( $release[ $name ] ) && is_scalar( $release[ $name ] ) ? (string) $release[ $name ] : '';
}

/** The release as the object WordPress keeps in the update_plugins transient. */
function queue_manager_update_item( array $release ) {
	$package = queue_manager_release_field( $release, 'package' );
	if ( '' === $package ) {
		$package = queue_manager_release_field( $release, 'download_url' );
	}
	return (object) array(
		'id'           => QUEUE_MANAGER_SLUG,
		'slug'         => QUEUE_MANAGER_SLUG,
		'plugin'       => plugin_basename( QUEUE_MANAGER_FILE ),
		'new_version'  => queue_manager_release_field( $release, 'new_version' ),
		'url'          => queue_manager_release_field( $release, 'url' ),
		'package'      => $package,
		'requires'     => queue_manager_release_field( $release, 'requires' ),
		'tested'       => queue_manager_release_field( $release, 'tested' ),
		'requires_php' => queue_manager_release_field( $release, 'requires_php' ),
	);
}

/**
 * Puts the registry's release in the update_plugins transient: under `response` (an update is
 * offered) when it is newer than this copy, else under `no_update` (so the auto-update toggle
 * still shows).
 */
function queue_manager_offer_update( $transient ) {
	if ( ! is_object( $transient ) ) {
		return $transient;
	}
	$release = queue_manager_release();
	if ( null === $release ) {
		return $transient;
	}
	$item   = queue_manager_update_item( $release );
	$plugin = plugin_basename( QUEUE_MANAGER_FILE );
	if ( version_compare( $item->new_version, QUEUE_MANAGER_VERSION, '>' ) && '' !== $item->package ) {
		$transient->response[ $plugin ] = $item;
		unset( $transient->no_update[ $plugin ] );
	} else {
		$transient->no_update[ $plugin ] = $item;
		unset( $transient->response[ $plugin ] );
	}
	return $transient;
}
add_filter( 'pre_set_site_transient_update_plugins', 'queue_manager_offer_update' );

/** The "View details" box for this plugin, from the registry. */
function queue_manager_plugin_information( $result, $action, $args ) {
	if ( 'plugin_information' !== $action || ! is_object( $args ) || ! isset( $args->slug ) || QUEUE_MANAGER_SLUG !== $args->slug ) {
		return $result;
	}
	$release = queue_manager_release();
	if ( null === $release ) {
		return $result;
	}
	$sections = array();
	if ( isset( $release['sections'] ) && is_array( $release['sections'] ) ) {
		foreach ( $release['sections'] as $section => $html ) {
			if ( is_string( $html ) ) {
				// WordPress shows these as HTML: keep only what a readme may hold.
				$sections[ sanitize_key( $section ) ] = wp_kses_post( $html );
			}
		}
	}
	$item = queue_manager_update_item( $release );
	$name = queue_manager_release_field( $release, 'name' );
	return (object) array(
		'name'          => '' === $name ? 'Queue Manager' : $name,
		'slug'          => QUEUE_MANAGER_SLUG,
		'version'       => $item->new_version,
		'author'        => 'Queue Manager',
		'homepage'      => $item->url,
		'requires'      => $item->requires,
		'tested'        => $item->tested,
		'requires_php'  => $item->requires_php,
		'download_link' => $item->package,
		'sections'      => $sections,
	);
}
add_filter( 'plugins_api', 'queue_manager_plugin_information', 10, 3 );

/**
 * Downloads this plugin's update itself and refuses it unless its SHA-256 is the registry's:
 * a zip altered on the way is never unpacked into wp-content.
 */
function queue_manager_verify_download( $reply, $package, $upgrader ) {
	if ( false !== $reply ) {
		return $reply;
	}
	$release = queue_manager_release();
	if ( null === $release || queue_manager_update_item( $release )->package !== $package ) {
		return $reply;
	}
	$expected = strtolower( queue_manager_release_field( $release, 'sha256' ) );
	if ( '' === $expected ) {
		return $reply;
	}
	if ( ! function_exists( 'download_url' ) ) {
		require_once ABSPATH . 'wp-admin/includes/file.php';
	}
	$trust = queue_manager_trust_server_for( $package );
	$file  = download_url( $package );
	$trust();
	if ( is_wp_error( $file ) ) {
		return $file;
	}
	if ( ! hash_equals( $expected, hash_file( 'sha256', $file ) ) ) {
		wp_delete_file( $file );
		return new WP_Error( 'queue_manager_integrity', __( 'The downloaded Queue Manager package does not match the SHA-256 the queue server published; it was not installed.', 'queue-manager' ) );
	}
	return $file;
}
add_filter( 'upgrader_pre_download', 'queue_manager_verify_download', 10, 3 );

/**
 * Lets WordPress's safe HTTP requests (download_url) reach `$url` when it is on the queue
 * server the administrator configured, even on a private address or an unusual port (a
 * self-hosted server often is): WordPress refuses those by default. Any other host keeps
 * WordPress's rules, so a registry answer cannot point the download at another internal host.
 * Returns the function that takes the permission back.
 *
 * @return callable
 */
function queue_manager_trust_server_for( $url ) {
	$server = wp_parse_url( queue_manager_settings()['server'] );
	$asked  = wp_parse_url( $url );
	$origin = function ( $parts ) {
		if ( ! is_array( $parts ) || empty( $parts['host'] ) || empty( $parts['scheme'] ) ) {
			return '';
		}
		$port = isset( $parts['port'] ) ? (int) $parts['port'] : ( 'https' === strtolower( $parts['scheme'] ) ? 443 : 80 );
		return strtolower( $parts['scheme'] . '://' . $parts['host'] ) . ':' . $port;
	};
	if ( '' === $origin( $asked ) || $origin( $asked ) !== $origin( $server ) ) {
		return function () {};
	}
	$host        = strtolower( $asked['host'] );
	$port        = isset( $asked['port'] ) ? (int) $asked['port'] : null;
	$is_external = function ( $external, $asked_host ) use ( $host ) {
		return strtolower( $asked_host ) === $host ? true : $external;
	};
	$ports       = function ( $allowed, $asked_host ) use ( $host, $port ) {
		if ( null !== $port && strtolower( $asked_host ) === $host && is_array( $allowed ) ) {
			$allowed[] = $port;
		}
		return $allowed;
	};
	add_filter( 'http_request_host_is_external', $is_external, 10, 2 );
	add_filter( 'http_allowed_safe_ports', $ports, 10, 2 );
	return function () use ( $is_external, $ports ) {
		remove_filter( 'http_request_host_is_external', $is_external, 10 );
		remove_filter( 'http_allowed_safe_ports', $ports, 10 );
	};
}

/** A new version is installed: forget the cached release so the next check asks again. */
function queue_manager_forget_release( $upgrader, $hook_extra ) {
	if ( isset( $hook_extra['plugins'] ) && in_array( plugin_basename( QUEUE_MANAGER_FILE ), (array) $hook_extra['plugins'], true ) ) {
		delete_transient( QUEUE_MANAGER_UPDATE_TRANSIENT );
	}
	if ( isset( $hook_extra['plugin'] ) && plugin_basename( QUEUE_MANAGER_FILE ) === $hook_extra['plugin'] ) {
		delete_transient( QUEUE_MANAGER_UPDATE_TRANSIENT );
	}
}
add_action( 'upgrader_process_complete', 'queue_manager_forget_release', 10, 2 );
