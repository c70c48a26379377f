"""The registry's errors: one exception per Confluent error code, with its HTTP status.

Confluent answers every failure as `{"error_code": N, "message": "..."}`; the code's first
three digits are the HTTP status except for the bare 4xx/5xx ones. The messages follow
Confluent's own wording so clients that match on them keep working.
"""

from __future__ import annotations


class RegistryError(Exception):
    """A failure the REST layer turns into Confluent's error body."""

    status = 500
    error_code = 50001

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


class SubjectNotFound(RegistryError):
    status, error_code = 404, 40401

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' not found.")


class VersionNotFound(RegistryError):
    status, error_code = 404, 40402

    def __init__(self, version: object) -> None:
        super().__init__(f"Version {version} not found.")


class SchemaNotFound(RegistryError):
    status, error_code = 404, 40403

    def __init__(self, schema_id: int | None = None) -> None:
        super().__init__("Schema not found" if schema_id is None
                         else f"Schema {schema_id} not found")


class SubjectSoftDeleted(RegistryError):
    status, error_code = 404, 40404

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' was soft deleted."
                         "Set permanent=true to delete permanently")


class SubjectNotSoftDeleted(RegistryError):
    status, error_code = 404, 40405

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' was not deleted first before being "
                         "permanently deleted")


class VersionSoftDeleted(RegistryError):
    status, error_code = 404, 40406

    def __init__(self, subject: str, version: int) -> None:
        super().__init__(f"Subject '{subject}' Version {version} was soft deleted."
                         "Set permanent=true to delete permanently")


class VersionNotSoftDeleted(RegistryError):
    status, error_code = 404, 40407

    def __init__(self, subject: str, version: int) -> None:
        super().__init__(f"Subject '{subject}' Version {version} was not deleted first "
                         "before being permanently deleted")


class SubjectCompatibilityNotConfigured(RegistryError):
    status, error_code = 404, 40408

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' does not have subject-level compatibility "
                         "configured")


class SubjectModeNotConfigured(RegistryError):
    status, error_code = 404, 40409

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' does not have subject-level mode configured")


class IncompatibleSchema(RegistryError):
    status, error_code = 409, 40901


class InvalidSchema(RegistryError):
    status, error_code = 422, 42201


class InvalidVersion(RegistryError):
    status, error_code = 422, 42202

    def __init__(self, version: object) -> None:
        super().__init__(f"The specified version '{version}' is not a valid version id. "
                         "Allowed values are between [1, 2^31-1] and the string \"latest\"")


class InvalidCompatibilityLevel(RegistryError):
    status, error_code = 422, 42203

    def __init__(self) -> None:
        super().__init__("Invalid compatibility level. Valid values are none, backward, "
                         "forward, full, backward_transitive, forward_transitive, and "
                         "full_transitive")


class InvalidMode(RegistryError):
    status, error_code = 422, 42204

    def __init__(self) -> None:
        super().__init__("Invalid mode. Valid values are READWRITE, READONLY, "
                         "READONLY_OVERRIDE and IMPORT")


class OperationNotPermitted(RegistryError):
    status, error_code = 422, 42205


class ReferenceExists(RegistryError):
    status, error_code = 422, 42206


class IdDoesNotMatch(RegistryError):
    status, error_code = 422, 42207


class InvalidSubject(RegistryError):
    status, error_code = 422, 42208

    def __init__(self, subject: str) -> None:
        super().__init__(f"The specified subject '{subject}' is not valid.")


class SchemaTooLarge(RegistryError):
    status, error_code = 422, 42209


class BadRequest(RegistryError):
    """A body that is not JSON or not the expected shape (Jersey's mapper answers 400/422)."""

    status, error_code = 400, 400


class UnprocessableEntity(RegistryError):
    status, error_code = 422, 422


class StoreError(RegistryError):
    status, error_code = 500, 50001


class OperationTimeout(RegistryError):
    status, error_code = 500, 50002


class ForwardingFailed(RegistryError):
    status, error_code = 500, 50003


class UnknownLeader(RegistryError):
    status, error_code = 500, 50004


class Forbidden(RegistryError):
    """An ACL denies the request (Confluent's security plugin answers 403/40301)."""

    status, error_code = 403, 40301
