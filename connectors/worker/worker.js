// Queue Manager Cloudflare Worker: being written.
