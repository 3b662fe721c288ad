"""The cloud routes of the fake Messages API: Amazon Bedrock's and Google Vertex AI's ways of
calling the same Messages API, as the anthropic SDK's AnthropicBedrock / AnthropicVertex send them.

- Bedrock: `POST /model/{model}/invoke`, SigV4-signed (`Authorization: AWS4-HMAC-SHA256
  Credential=<access key>/...`), the body a Messages API body without `model` and with
  `anthropic_version` ("bedrock-2023-05-31").
- Vertex: `POST [/v1]/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict`
  (`:streamRawPredict` when streaming, SSE as the Messages API), `Authorization: Bearer <token>`,
  the body without `model`, with `anthropic_version` ("vertex-2023-10-16").
- Google's OAuth token endpoint, `POST /token`: a credentials file whose `token_uri` points here
  (an `authorized_user` file, as `gcloud auth application-default login` writes) gets a token.

- Bedrock's streaming route, `POST /model/{model}/invoke-with-response-stream` (what Claude Code
  calls on Bedrock): the Messages API's stream events, each the base64 `bytes` of a `chunk` event
  in AWS's binary event-stream framing (`bedrock_event_stream`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

FAKE_GOOGLE_TOKEN = "ya29.fake-local-token"

_BEDROCK = re.compile(r"^/model/(?P<model>[^/]+)/(?P<verb>invoke|invoke-with-response-stream)$")
_VERTEX = re.compile(r"^(?:/v1)?/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/publishers/anthropic/"
                     r"models/(?P<model>[^/:]+):(?P<verb>rawPredict|streamRawPredict)$")


@dataclass(frozen=True)
class CloudRoute:
    """A generation request on a cloud route: which cloud, and the model named in its path."""

    cloud: str  # "bedrock" or "vertex"
    model: str
    project: str | None = None
    region: str | None = None
    stream: bool = False  # Bedrock's invoke-with-response-stream (Vertex says so in its body)


def cloud_route(path: str) -> CloudRoute | None:
    """The Bedrock or Vertex generation route `path` is, or None."""
    match = _BEDROCK.match(path)
    if match:
        return CloudRoute("bedrock", unquote(match["model"]), stream=match["verb"] != "invoke")
    match = _VERTEX.match(path)
    if match:
        return CloudRoute("vertex", unquote(match["model"]), match["project"], match["region"])
    return None


def google_token_reply() -> dict[str, object]:
    """What Google's token endpoint answers a refresh: an access token good for an hour."""
    return {"access_token": FAKE_GOOGLE_TOKEN, "expires_in": 3600, "token_type": "Bearer",
            "scope": "https://www.googleapis.com/auth/cloud-platform"}


def google_service_account_file(path: str | Path, token_uri: str, project_id: str = "fake-project") -> Path:
    """Write a Google service-account key file (a fresh RSA key) whose `token_uri` is the fake's
    /token: GOOGLE_APPLICATION_CREDENTIALS pointing at it gives Application Default Credentials
    that google-auth really signs and exchanges for a token, offline. Needs `cryptography`
    (google-auth's own dependency)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    info = {"type": "service_account", "project_id": project_id, "private_key_id": "fake-key-id",
            "private_key": pem, "client_email": f"middle@{project_id}.iam.gserviceaccount.com",
            "client_id": "1", "token_uri": token_uri}
    target = Path(path)
    target.write_text(json.dumps(info))
    target.chmod(0o600)
    return target


FAKE_AWS_ACCESS_KEY = "AKIDFAKELOCAL"


def bedrock_env(region: str = "us-west-2", access_key: str = FAKE_AWS_ACCESS_KEY) -> dict[str, str]:
    """Static AWS credentials as boto3 reads them from the environment, for the Bedrock route of
    the fake; no instance-metadata lookups and no user's ~/.aws files. (Unset AWS_PROFILE too.)"""
    return {"AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": "fake-secret", "AWS_REGION": region,
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/nonexistent/aws-config",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials"}


def vertex_env(key_file: str | Path, region: str = "us-east5") -> dict[str, str]:
    """Application Default Credentials from `key_file` (google_service_account_file) and a region,
    as google-auth and the anthropic SDK read them; no metadata-server lookups."""
    return {"GOOGLE_APPLICATION_CREDENTIALS": str(key_file), "CLOUD_ML_REGION": region, "NO_GCE_CHECK": "True"}


def bedrock_event_stream(events: list[dict[str, object]]) -> bytes:
    """Messages API stream events as Bedrock's invoke-with-response-stream sends them: one AWS
    event-stream message per event (prelude with its CRC, `:event-type chunk` headers, the payload
    `{"bytes": base64(event JSON)}`, the message CRC), as the AWS SDKs decode them."""
    return b"".join(_event_message(json.dumps({"bytes": base64.b64encode(json.dumps(e).encode()).decode()})
                                   .encode()) for e in events)


def _event_message(payload: bytes) -> bytes:
    headers = b"".join(_string_header(name, value) for name, value in (
        (":event-type", "chunk"), (":content-type", "application/json"), (":message-type", "event")))
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    head = prelude + struct.pack(">I", binascii.crc32(prelude)) + headers + payload
    return head + struct.pack(">I", binascii.crc32(head))


def _string_header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value
