"""HTTP below the API: connection limits, request bodies checked as they arrive, middleware, the server loop."""
