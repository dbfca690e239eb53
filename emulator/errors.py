"""The engine's exceptions: one tree, mapped once (in `api`) to OpenAI's error envelope.

    EmulatorError                        status  type                    code
    ├── InvalidRequest                   400     invalid_request_error   (as raised)
    │   ├── MissingParameter             400     invalid_request_error   missing_required_parameter
    │   ├── UnknownParameter             400     invalid_request_error   unknown_parameter
    │   ├── InvalidType                  400     invalid_request_error   invalid_type
    │   ├── InvalidValue                 400     invalid_request_error   invalid_value
    │   ├── UnsupportedParameter         400     invalid_request_error   unsupported_parameter
    │   ├── PreviousResponseNotFound     400     invalid_request_error   previous_response_not_found
    │   ├── InvalidFingerprint           400     invalid_request_error   invalid_fingerprint
    │   ├── InvalidEncryptedContent      400     invalid_request_error   invalid_encrypted_content
    │   ├── ProgramDivergence            400     invalid_request_error   program_divergence
    │   ├── ContractViolation            400     invalid_request_error   contract_violation
    │   ├── NoScenarioMatched            400     invalid_request_error   no_scenario_matched
    │   ├── ScenarioTurnError            400     invalid_request_error   scenario_error
    │   └── InvalidScenario              400     invalid_request_error   invalid_scenario
    ├── Unauthorized                     401     invalid_request_error   invalid_api_key
    ├── NotFound                         404     invalid_request_error   (none)
    ├── PayloadTooLarge                  413     invalid_request_error   (none)
    ├── UpstreamError                    502     server_error            upstream_error
    │   └── UpstreamInvalidToolCall      502     server_error            upstream_invalid_tool_call
    ├── UpstreamTimeout                  504     server_error            upstream_timeout
    └── StatusError                      any     any  (routing errors, the edge's refusals, and:)
        └── ScriptedError                any     as the scenario says  (an injected fault)

A class per code that recurs; the rest are `InvalidRequest`s (or `StatusError`s) with their code.
Each carries exactly the fields of `{"error": {"message", "type", "param", "code"}}` plus the
HTTP status and any headers. The words are not here: every message is made in
`emulator/messages.py`, the catalogue, which picks the class. Program faults are not exceptions:
they become `program_output.status = "incomplete"`.
"""

from __future__ import annotations

__all__ = [
    "ContractViolation",
    "EmulatorError",
    "InvalidEncryptedContent",
    "InvalidFingerprint",
    "InvalidRequest",
    "InvalidScenario",
    "InvalidType",
    "InvalidValue",
    "MissingParameter",
    "NoScenarioMatched",
    "NotFound",
    "PayloadTooLarge",
    "PreviousResponseNotFound",
    "ProgramDivergence",
    "ScenarioTurnError",
    "ScriptedError",
    "StatusError",
    "Unauthorized",
    "UnknownParameter",
    "UnsupportedParameter",
    "UpstreamError",
    "UpstreamInvalidToolCall",
    "UpstreamTimeout",
]


class EmulatorError(Exception):
    status: int = 500
    type: str = "server_error"
    code: str | None = None
    """The class's code; an instance may be given another."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code if code is not None else type(self).code
        self.headers = headers or {}

    def body(self) -> dict[str, dict[str, str | None]]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class InvalidRequest(EmulatorError):
    status = 400
    type = "invalid_request_error"


class MissingParameter(InvalidRequest):
    code = "missing_required_parameter"


class UnknownParameter(InvalidRequest):
    code = "unknown_parameter"


class InvalidType(InvalidRequest):
    code = "invalid_type"


class InvalidValue(InvalidRequest):
    code = "invalid_value"


class UnsupportedParameter(InvalidRequest):
    code = "unsupported_parameter"


class PreviousResponseNotFound(InvalidRequest):
    code = "previous_response_not_found"


class InvalidFingerprint(InvalidRequest):
    code = "invalid_fingerprint"


class InvalidEncryptedContent(InvalidRequest):
    code = "invalid_encrypted_content"


class ProgramDivergence(InvalidRequest):
    code = "program_divergence"


class ContractViolation(InvalidRequest):
    code = "contract_violation"


class NoScenarioMatched(InvalidRequest):
    code = "no_scenario_matched"

    def __init__(self, message: str, report: dict[str, object]) -> None:
        super().__init__(message, param="input")
        self.report = report


class ScenarioTurnError(InvalidRequest):
    """A scenario that cannot play its turn for this request (a template, a tool it calls)."""

    code = "scenario_error"


class InvalidScenario(InvalidRequest):
    code = "invalid_scenario"


class Unauthorized(EmulatorError):
    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class NotFound(EmulatorError):
    status = 404
    type = "invalid_request_error"


class PayloadTooLarge(EmulatorError):
    status = 413
    type = "invalid_request_error"


class UpstreamError(EmulatorError):
    """The model upstream failed: unreachable, an error status, an answer of an unknown shape."""

    status = 502
    type = "server_error"
    code = "upstream_error"


class UpstreamInvalidToolCall(UpstreamError):
    """The model upstream called the program tool without usable code."""

    code = "upstream_invalid_tool_call"


class UpstreamTimeout(EmulatorError):
    status = 504
    type = "server_error"
    code = "upstream_timeout"


class StatusError(EmulatorError):
    """An error with any status and type."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, param=param, code=code, headers=headers)
        self.status = status
        self.type = type


class ScriptedError(StatusError):
    """An error a scenario asked for (a fault)."""
