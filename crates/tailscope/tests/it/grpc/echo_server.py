"""A real gRPC server for tailscope's tests: PyPI's grpcio, service tailscope.test.Echo.

Say answers with the request's own bytes (a Ping, see echo.proto); Fail ends every call with
RESOURCE_EXHAUSTED; Auth is Say for calls whose metadata says "authorization: Bearer t0k",
UNAUTHENTICATED for the others. Methods are served without generated code: grpcio's generic handler
hands the handlers the raw message bytes. Prints its port, then serves until killed.

    python echo_server.py [--tls CERT KEY]
"""

import sys
from concurrent import futures

import grpc


def say(request, context):
    return request


def fail(request, context):
    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "told to fail")


def auth(request, context):
    if ("authorization", "Bearer t0k") not in context.invocation_metadata():
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "no token")
    return request


def main():
    handler = grpc.method_handlers_generic_handler(
        "tailscope.test.Echo",
        {
            "Say": grpc.unary_unary_rpc_method_handler(say),
            "Fail": grpc.unary_unary_rpc_method_handler(fail),
            "Auth": grpc.unary_unary_rpc_method_handler(auth),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[handler])
    if len(sys.argv) == 4 and sys.argv[1] == "--tls":
        with open(sys.argv[2], "rb") as f:
            cert = f.read()
        with open(sys.argv[3], "rb") as f:
            key = f.read()
        creds = grpc.ssl_server_credentials([(key, cert)])
        port = server.add_secure_port("127.0.0.1:0", creds)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
