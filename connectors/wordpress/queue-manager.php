<?php
/*
 * Plugin Name: Queue Manager
 * Version: 1.0.0
 */
