"""Serving: the transports (stdio, Streamable HTTP, legacy SSE) and what guards them.

``stdio`` serves one client over stdin/stdout; ``http`` builds and runs the Starlette app under
uvicorn (a stateless POST answered in its own task is the ``direct`` feature's, an endpoint wrapper);
``guard`` holds the ASGI checks (Host/Origin, bearer token, ids on refused bodies); ``protocol`` the connection limits (TCP_NODELAY, header and body timeouts, the
connection cap); ``session`` the SDK middlewares that gate a session's requests; ``wire`` the
answers owed to messages the SDK refuses. ``plexor.transports`` re-exports the public names.
"""
