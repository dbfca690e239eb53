"""The engine's exceptions: one tree, mapped once (in `api`) to OpenAI's error envelope.

    EmulatorError                      status  type
    ├── InvalidRequest                 400     invalid_request_error
    │   ├── PreviousResponseNotFound   400     invalid_request_error  (code previous_response_not_found)
    │   └── NoScenarioMatched          400     invalid_request_error  (code no_scenario_matched)
    ├── Unauthorized                   401     invalid_request_error  (code invalid_api_key)
    ├── NotFound                       404     invalid_request_error
    ├── PayloadTooLarge                413     invalid_request_error
    └── StatusError                    any     any  (routing errors, and:)
        └── ScriptedError              any     as the scenario says  (an injected fault)

Each carries exactly the fields of `{"error": {"message", "type", "param", "code"}}` plus the
HTTP status and any headers. Program faults are not exceptions: they become
`program_output.status = "incomplete"`.
"""

from __future__ import annotations

__all__ = [
    "EmulatorError",
    "InvalidRequest",
    "NoScenarioMatched",
    "NotFound",
    "PayloadTooLarge",
    "PreviousResponseNotFound",
    "ScriptedError",
    "StatusError",
    "Unauthorized",
]


class EmulatorError(Exception):
    status: int = 500
    type: str = "server_error"

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
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, dict[str, str | None]]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class InvalidRequest(EmulatorError):
    status = 400
    type = "invalid_request_error"


class PreviousResponseNotFound(InvalidRequest):
    def __init__(self, response_id: str) -> None:
        super().__init__(
            f"Previous response with id '{response_id}' not found.",
            param="previous_response_id",
            code="previous_response_not_found",
        )


class NoScenarioMatched(InvalidRequest):
    def __init__(self, message: str, report: dict[str, object]) -> None:
        super().__init__(message, param="input", code="no_scenario_matched")
        self.report = report


class Unauthorized(EmulatorError):
    status = 401
    type = "invalid_request_error"


class NotFound(EmulatorError):
    status = 404
    type = "invalid_request_error"


class PayloadTooLarge(EmulatorError):
    status = 413
    type = "invalid_request_error"


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
