"""The ``auth`` built-in plugin: OAuth 2.1 resource server, scopes, tool profiles and audit, on the
server-extension hooks (:mod:`plexor.extending`).

Over HTTP its ASGI wrapper is the access guard (401/403, protected resource metadata) and its
request layer the one authorization decision; the caller's principal comes from the verified
token. Turning it off (``PLEXOR_DISABLE=auth``) while ``[plexor.auth]``, a profile, ``--profile``
or ``--auth-issuer`` is configured makes ``serve`` refuse to start (``plexor.serving.features``):
a security feature fails closed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from plexor.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover - typing only
    from starlette.types import ASGIApp

    from plexor.core.base import KernelBase
    from plexor.core.kernel import Kernel
    from plexor.extending import RequestLayer, ServerSetup


def _kernel(setup: ServerSetup) -> Kernel:
    from plexor.core.kernel import Kernel

    kernel = setup.kernel
    if not isinstance(kernel, Kernel):  # a server serves a whole kernel: its registry decides the scopes
        raise TypeError(f"auth needs a plexor Kernel, not {type(kernel).__name__}")
    return kernel


@hookimpl
def plexor_asgi_wrapper(app: ASGIApp, setup: ServerSetup) -> ASGIApp | None:
    """The access guard in front of every route, when OAuth or profiles are configured."""
    from plexor.features.auth import Served, protect

    opts = setup.options
    if opts is None:  # stdio: no HTTP app to wrap
        return None
    if not isinstance(setup.server, Served):  # the authorization layer goes on its request path
        raise TypeError(f"auth needs a plexor server (its request path), not {type(setup.server).__name__}")
    guarded, oauth = protect(app, _kernel(setup), setup.server, token=opts.token, max_body=opts.max_body_bytes,
                             issuer=opts.auth_issuer, resource=opts.resource_url, profile=opts.profile)
    setup.shared["authenticates"] = oauth  # the static token is then checked by the guard, as a caller with every scope
    setup.shared["profiles"] = True  # a request naming a profile is answered here (NoProfiles when none exist)
    return guarded


@hookimpl
def plexor_request_layers(setup: ServerSetup) -> list[RequestLayer] | None:
    """Under stdio with ``serve --profile``: the same authorization layer as HTTP's, for that profile."""
    if setup.transport != "stdio" or setup.profile is None:
        return None  # over HTTP the guard adds the layer with the policy it built (plexor.features.auth.protect)
    from plexor.extending import RequestLayer
    from plexor.features.auth import Profile, stdio_layer

    if not isinstance(setup.profile, Profile):
        raise TypeError(f"the stdio profile must be a plexor.features.auth Profile, not {type(setup.profile).__name__}")
    return [RequestLayer("authorization", stdio_layer(_kernel(setup), setup.profile), name="authorization")]


@hookimpl
def plexor_principal(scope: Mapping[str, object], kernel: KernelBase) -> str | None:
    """The OAuth caller (issuer, subject and client, hashed) the guard verified for this request."""
    from plexor.features.auth.guard import ACCESS_KEY

    owner = getattr(scope.get(ACCESS_KEY), "principal", "")
    return f"oauth:{owner}" if owner else None
