<?php
/**
 * The settings screen (Settings → Queue Manager): the queue server, the room, the Public API
 * key (kept as an option, never printed back: the field only says a key is saved and its last
 * four characters) and the fail mode; and "Check installation", which runs the server's install
 * check (GET /api/v1/verify) and lists every check it reports.
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/** The settings screen's slug (options-general.php?page=queue-manager). */
const QUEUE_MANAGER_PAGE = 'queue-manager';

/**
 * Cleans a submitted settings form. An empty API key field keeps the saved key, so saving the
 * form never needs the key to be shown again.
 */
function queue_manager_sanitize_settings( $input ) {
	$saved = queue_manager_settings();
	$input = is_array( $input ) ? $input : array();
	$clean = $saved;

	$server = isset( $input['server'] ) ? untrailingslashit( esc_url_raw( trim( (string) $input['server'] ), array( 'http', 'https' ) ) ) : '';
	if ( '' === $server && ! empty( $input['server'] ) ) {
		add_settings_error( QUEUE_MANAGER_OPTION, 'server', __( 'The queue server must be an http(s) URL.', 'queue-manager' ) );
	} else {
		$clean['server'] = $server;
	}

	$room_id = isset( $input['room_id'] ) ? trim( (string) $input['room_id'] ) : '';
	if ( '' === $room_id || queue_manager_is_room_id( $room_id ) ) {
		$clean['room_id'] = $room_id;
	} else {
		add_settings_error( QUEUE_MANAGER_OPTION, 'room_id', __( 'A room id is 1–64 letters, digits, "_" or "-".', 'queue-manager' ) );
	}

	$api_key = isset( $input['api_key'] ) ? trim( (string) $input['api_key'] ) : '';
	if ( ! empty( $input['forget_api_key'] ) ) {
		$clean['api_key'] = '';
	} elseif ( '' !== $api_key ) {
		$clean['api_key'] = $api_key;
	}

	$clean['fail_mode'] = isset( $input['fail_mode'] ) && 'closed' === $input['fail_mode'] ? 'closed' : 'open';
	return $clean;
}

/** Registers the option (not autoloaded on every page beyond what WordPress does) and the menu. */
function queue_manager_admin_init() {
	register_setting(
		'queue_manager',
		QUEUE_MANAGER_OPTION,
		array(
			'type'              => 'array',
			'sanitize_callback' => 'queue_manager_sanitize_settings',
			'show_in_rest'      => false,
		)
	);
}
add_action( 'admin_init', 'queue_manager_admin_init' );

function queue_manager_admin_menu() {
	add_options_page(
		__( 'Queue Manager', 'queue-manager' ),
		__( 'Queue Manager', 'queue-manager' ),
		'manage_options',
		QUEUE_MANAGER_PAGE,
		'queue_manager_render_settings'
	);
}
add_action( 'admin_menu', 'queue_manager_admin_menu' );

/** A "Settings" link beside Deactivate on the Plugins screen. */
function queue_manager_action_links( $links ) {
	$url = admin_url( 'options-general.php?page=' . QUEUE_MANAGER_PAGE );
	array_unshift( $links, '<a href="' . esc_url( $url ) . '">' . esc_html__( 'Settings', 'queue-manager' ) . '</a>' );
	return $links;
}
add_filter( 'plugin_action_links_' . plugin_basename( QUEUE_MANAGER_FILE ), 'queue_manager_action_links' );

/**
 * Runs the server's install check for these settings and `$page` (this site's home page when
 * empty; name a protected page to see it judged in scope). Returns the report (`ok`, `checks`: id, status, title, detail, fix) or a WP_Error saying why there is none.
 *
 * @return array|WP_Error
 */
function queue_manager_verify_installation( array $settings, $page = '' ) {
	if ( '' === $settings['server'] || ! queue_manager_is_room_id( $settings['room_id'] ) ) {
		return new WP_Error( 'queue_manager_unconfigured', __( 'Save the queue server and the room id first.', 'queue-manager' ) );
	}
	$query   = http_build_query(
		array(
			'roomId'    => $settings['room_id'],
			'url'       => '' === $page ? home_url( '/' ) : $page,
			'connector' => 'wordpress',
			'version'   => QUEUE_MANAGER_VERSION,
		),
		'',
		'&',
		PHP_QUERY_RFC3986
	);
	$headers = array( 'Accept' => 'application/json' );
	if ( '' !== $settings['api_key'] ) {
		// Only ever as the Bearer header: a key in a URL would end up in access logs.
		$headers['Authorization'] = 'Bearer ' . $settings['api_key'];
	}
	$request = array(
		'timeout'     => 10,
		'redirection' => 0,
		'headers'     => $headers,
		'user-agent'  => 'queue-manager-wordpress/' . QUEUE_MANAGER_VERSION,
	);
	$answer = wp_remote_get( $settings['server'] . '/api/v1/verify?' . $query, $request );
	if ( ! is_wp_error( $answer ) && 404 === (int) wp_remote_retrieve_response_code( $answer ) ) {
		$body = json_decode( wp_remote_retrieve_body( $answer ), true );
		if ( ! ( is_array( $body ) && isset( $body['code'] ) ) ) {
			// A server older than the /api/v1 prefix.
			$answer = wp_remote_get( $settings['server'] . '/api/verify?' . $query, $request );
		}
	}
	if ( is_wp_error( $answer ) ) {
		/* translators: %s: why the request failed */
		return new WP_Error( 'queue_manager_unreachable', sprintf( __( 'The queue server did not answer: %s', 'queue-manager' ), $answer->get_error_message() ) );
	}
	$status = (int) wp_remote_retrieve_response_code( $answer );
	$body   = json_decode( wp_remote_retrieve_body( $answer ), true );
	if ( 200 !== $status || ! is_array( $body ) || ! isset( $body['checks'] ) || ! is_array( $body['checks'] ) ) {
		$error = is_array( $body ) && isset( $body['error'] ) && is_string( $body['error'] ) ? $body['error'] : __( 'not an install check report', 'queue-manager' );
		/* translators: 1: HTTP status, 2: the server's message */
		return new WP_Error( 'queue_manager_refused', sprintf( __( 'The queue server answered %1$d: %2$s', 'queue-manager' ), $status, $error ) );
	}
	return $body;
}

/** The install check's report as an HTML table, every value escaped. */
function queue_manager_render_report( $report ) {
	if ( is_wp_error( $report ) ) {
		echo '<div class="notice notice-error inline" id="queue-manager-report"><p>' . esc_html( $report->get_error_message() ) . '</p></div>';
		return;
	}
	$ok = ! empty( $report['ok'] );
	echo '<div class="notice ' . ( $ok ? 'notice-success' : 'notice-error' ) . ' inline" id="queue-manager-report" data-ok="' . ( $ok ? 'true' : 'false' ) . '"><p>'
		. esc_html( $ok ? __( 'The installation is ready.', 'queue-manager' ) : __( 'The installation needs a fix (see the failing checks).', 'queue-manager' ) )
		. '</p></div>';
	echo '<table class="widefat striped"><thead><tr><th>' . esc_html__( 'Status', 'queue-manager' ) . '</th><th>' . esc_html__( 'Check', 'queue-manager' ) . '</th><th>' . esc_html__( 'Detail', 'queue-manager' ) . '</th><th>' . esc_html__( 'Fix', 'queue-manager' ) . '</th></tr></thead><tbody>';
	foreach ( $report['checks'] as $check ) {
		if ( ! is_array( $check ) ) {
			continue;
		}
		$field = function ( $name ) use ( $check ) {
			return isset( $check[ $name ] ) && is_scalar( $check[ $name ] ) ? (string) $check[ $name ] : '';
		};
		echo '<tr data-check="' . esc_attr( $field( 'id' ) ) . '" data-status="' . esc_attr( $field( 'status' ) ) . '">'
			. '<td><strong>' . esc_html( $field( 'status' ) ) . '</strong></td>'
			. '<td>' . esc_html( $field( 'title' ) ) . '<br><code>' . esc_html( $field( 'id' ) ) . '</code></td>'
			. '<td>' . esc_html( $field( 'detail' ) ) . '</td>'
			. '<td>' . ( '' === $field( 'fix' ) ? '' : '<code>' . esc_html( $field( 'fix' ) ) . '</code>' ) . '</td>'
			. '</tr>';
	}
	echo '</tbody></table>';
}

/** Settings → Queue Manager. */
function queue_manager_render_settings() {
	if ( ! current_user_can( 'manage_options' ) ) {
		return;
	}
	$settings = queue_manager_settings();
	$report   = null;
	$page     = home_url( '/' );
	if ( isset( $_POST['queue_manager_verify'] ) ) {
		check_admin_referer( 'queue_manager_verify' );
		if ( isset( $_POST['queue_manager_verify_url'] ) ) {
			$asked = esc_url_raw( trim( wp_unslash( (string) $_POST['queue_manager_verify_url'] ) ), array( 'http', 'https' ) );
			$page  = '' === $asked ? $page : $asked;
		}
		$report = queue_manager_verify_installation( $settings, $page );
	}
	$name = QUEUE_MANAGER_OPTION;
	?>
	<div class="wrap">
		<h1><?php esc_html_e( 'Queue Manager', 'queue-manager' ); ?></h1>
		<p><?php esc_html_e( 'Visitors of the pages your room protects wait in its waiting room until it lets them in. The room\'s URL rules on the queue server decide which pages those are.', 'queue-manager' ); ?></p>
		<form method="post" action="options.php" id="queue-manager-settings">
			<?php settings_fields( 'queue_manager' ); ?>
			<table class="form-table" role="presentation">
				<tr>
					<th scope="row"><label for="queue-manager-server"><?php esc_html_e( 'Queue server', 'queue-manager' ); ?></label></th>
					<td><input type="url" class="regular-text" id="queue-manager-server" name="<?php echo esc_attr( $name ); ?>[server]" value="<?php echo esc_attr( $settings['server'] ); ?>" placeholder="https://queue.example.com">
						<p class="description"><?php esc_html_e( 'The queue server\'s public base URL.', 'queue-manager' ); ?></p></td>
				</tr>
				<tr>
					<th scope="row"><label for="queue-manager-room"><?php esc_html_e( 'Room id', 'queue-manager' ); ?></label></th>
					<td><input type="text" class="regular-text" id="queue-manager-room" name="<?php echo esc_attr( $name ); ?>[room_id]" value="<?php echo esc_attr( $settings['room_id'] ); ?>" pattern="[A-Za-z0-9_-]{1,64}"></td>
				</tr>
				<tr>
					<th scope="row"><label for="queue-manager-key"><?php esc_html_e( 'Public API key', 'queue-manager' ); ?></label></th>
					<td><input type="password" class="regular-text" id="queue-manager-key" name="<?php echo esc_attr( $name ); ?>[api_key]" value="" autocomplete="new-password">
						<p class="description">
						<?php
						if ( '' === $settings['api_key'] ) {
							esc_html_e( 'No key is saved. Enter the server\'s PUBLIC_API_KEY.', 'queue-manager' );
						} else {
							/* translators: %s: the last four characters of the saved key */
							echo esc_html( sprintf( __( 'A key ending in %s is saved. Leave this empty to keep it.', 'queue-manager' ), substr( $settings['api_key'], -4 ) ) );
							echo ' <label><input type="checkbox" name="' . esc_attr( $name ) . '[forget_api_key]" value="1"> ' . esc_html__( 'Forget the saved key', 'queue-manager' ) . '</label>';
						}
						?>
						</p></td>
				</tr>
				<tr>
					<th scope="row"><label for="queue-manager-fail-mode"><?php esc_html_e( 'When the queue server cannot answer', 'queue-manager' ); ?></label></th>
					<td><select id="queue-manager-fail-mode" name="<?php echo esc_attr( $name ); ?>[fail_mode]">
						<option value="open" <?php selected( $settings['fail_mode'], 'open' ); ?>><?php esc_html_e( 'Serve the page (fail open, recommended)', 'queue-manager' ); ?></option>
						<option value="closed" <?php selected( $settings['fail_mode'], 'closed' ); ?>><?php esc_html_e( 'Answer 503, try again in 30 s (fail closed)', 'queue-manager' ); ?></option>
					</select></td>
				</tr>
			</table>
			<?php submit_button(); ?>
		</form>
		<h2><?php esc_html_e( 'Check installation', 'queue-manager' ); ?></h2>
		<p><?php esc_html_e( 'Asks the queue server whether the saved settings protect this site: the key, the room, its state, this site\'s origin, and whether the page below is one the room protects.', 'queue-manager' ); ?></p>
		<form method="post" id="queue-manager-verify">
			<?php wp_nonce_field( 'queue_manager_verify' ); ?>
			<input type="hidden" name="queue_manager_verify" value="1">
			<p><label for="queue-manager-verify-url"><?php esc_html_e( 'Page to check', 'queue-manager' ); ?></label>
				<input type="url" class="regular-text" id="queue-manager-verify-url" name="queue_manager_verify_url" value="<?php echo esc_attr( $page ); ?>"></p>
			<?php submit_button( __( 'Check installation', 'queue-manager' ), 'secondary', 'queue_manager_verify_submit', false ); ?>
		</form>
		<?php
		if ( null !== $report ) {
			queue_manager_render_report( $report );
		}
		?>
	</div>
	<?php
}
