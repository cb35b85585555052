"""An RPC handler wrapped so that something is entered around each of its calls, in the call's own task: what it
binds (a request id, the signed-in principal) then holds in the handler however grpc.aio schedules interceptors. The
server's observability interceptor and the auth interceptor both build on it."""

import contextlib
import inspect
from collections.abc import AsyncIterator, Callable

import grpc

from contracts.refusals import invalid

# Wraps one call: entered in the handler's own task before the handler runs, exited after its final status.
Around = Callable[[grpc.aio.ServicerContext], contextlib.AbstractAsyncContextManager]


def wrap_handler(
    handler: grpc.RpcMethodHandler, around: Around, *, decode_inside: bool = False
) -> grpc.RpcMethodHandler:
    """The same RPC handler with ``around(context)`` entered and exited around each call, in the call's task.

    Works for the four RPC shapes; a streaming-response behavior may be an async generator or a coroutine that
    writes with ``context.write``, and the wrapper keeps that shape, which grpc.aio inspects.

    ``decode_inside``: the wrapper, not grpc, decodes the request bytes, inside ``around``, so that bytes that are
    not the request message become a Refusal (INVALID_ARGUMENT) there; grpc's own failed decode ends INTERNAL. Only
    the outermost wrapper of a chain may decode (the ones inside it receive messages).
    """
    if handler.unary_unary:
        behavior, factory = handler.unary_unary, grpc.unary_unary_rpc_method_handler
    elif handler.unary_stream:
        behavior, factory = handler.unary_stream, grpc.unary_stream_rpc_method_handler
    elif handler.stream_unary:
        behavior, factory = handler.stream_unary, grpc.stream_unary_rpc_method_handler
    else:
        behavior, factory = handler.stream_stream, grpc.stream_stream_rpc_method_handler
    decode = _decoder(handler) if decode_inside else None

    if inspect.isasyncgenfunction(behavior):

        async def wrapped(request_or_iterator, context) -> AsyncIterator:
            async with around(context):
                request = decode(request_or_iterator) if decode else request_or_iterator
                async for response in behavior(request, context):
                    yield response

    else:

        async def wrapped(request_or_iterator, context):
            async with around(context):
                request = decode(request_or_iterator) if decode else request_or_iterator
                result = behavior(request, context)
                return await result if inspect.isawaitable(result) else result

    return factory(
        wrapped,
        request_deserializer=None if decode else handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


def _decoder(handler: grpc.RpcMethodHandler) -> Callable[[object], object] | None:
    """Turns a call's raw request (or each message of a request stream) into its message, or a Refusal."""
    deserialize = handler.request_deserializer
    if deserialize is None:
        return None

    def one(raw: bytes):
        try:
            return deserialize(raw)
        except Exception as err:  # protobuf's DecodeError, or a string field that is not UTF-8
            raise invalid("undecodable_request", f"the request is not a valid message: {type(err).__name__}") from None

    if not (handler.stream_unary or handler.stream_stream):
        return one

    def each(raw_messages):
        async def decoded():
            async for raw in raw_messages:
                yield one(raw)

        return decoded()

    return each


class HandlerWrappers:
    """Each method's handler wrapped once, for an interceptor: the rest of the chain gives back the same handler
    object for a method on every call, so its wrapper is built on the first call and reused while that holds."""

    def __init__(self, around_for: Callable[[str], Around], *, decode_inside: bool = False):
        self._around_for = around_for  # full method name → what to enter around each of its calls
        self._decode_inside = decode_inside  # see wrap_handler
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def wrap(self, full_method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        known = self._wrapped.get(full_method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = wrap_handler(handler, self._around_for(full_method), decode_inside=self._decode_inside)
        self._wrapped[full_method] = (handler, wrapped)
        return wrapped
