/* Queue Manager browser snippet: being written. */
