"""Verified, never-overwriting object writes to S3 (paper §8.3), through boto3.

Every object goes up with a SHA-256 checksum the server checks (a wrong digest is refused) and
``If-None-Match: *`` (a second write of a key gets 412 and never replaces the first). Each object
is then verified with ``head_object``: its size, and its SHA-256 — composite
(``sha256(part digests)-N``) for a multipart upload. A multipart upload left unfinished by a
killed uploader is never visible as an object; it is aborted before the key is written again.

Credentials come from the standard AWS chain; no message here ever contains the secret key:
errors name the endpoint and the access key id.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import UploadConfig

AUTH_CODES = {"SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied", "403",
              "InvalidToken", "ExpiredToken"}


class StoreError(RuntimeError):
    """An S3 request failed: one line naming the endpoint, the operation, the bucket and the
    key (never the secret). The subclasses are what a caller handles on its own."""


class StoreUnreachable(StoreError):
    """The store did not answer (connection refused, timeout, 5xx): back off, keep local."""


class StoreAuthError(StoreError):
    """The store refused our credentials: names the endpoint and key id, never the secret."""


class StoreConflict(StoreError):
    """An object already exists under the key with other bytes: never overwritten."""


@dataclass(frozen=True)
class Digest:
    """What a local file must look like in the store."""

    size: int
    sha256: str  # hex of the whole file
    checksum: str  # what head_object(ChecksumMode=ENABLED) returns: base64, "-N" if multipart
    parts: tuple[str, ...]  # base64 SHA-256 per part ((): a single PUT)


def file_digest(path: Path, multipart_bytes: int, part_bytes: int) -> Digest:
    size = path.stat().st_size
    whole = hashlib.sha256()
    parts: list[bytes] = []
    with open(path, "rb") as f:
        while chunk := f.read(part_bytes):
            whole.update(chunk)
            parts.append(hashlib.sha256(chunk).digest())
    if size >= multipart_bytes and len(parts) > 1:
        comp = base64.b64encode(hashlib.sha256(b"".join(parts)).digest()).decode()
        return Digest(size, whole.hexdigest(), f"{comp}-{len(parts)}",
                      tuple(base64.b64encode(p).decode() for p in parts))
    return Digest(size, whole.hexdigest(), base64.b64encode(whole.digest()).decode(), ())


def _code(exc: Exception) -> str:
    resp = getattr(exc, "response", None) or {}
    return str((resp.get("Error") or {}).get("Code", ""))


def _message(exc: Exception) -> str:
    resp = getattr(exc, "response", None) or {}
    return str((resp.get("Error") or {}).get("Message", "")) or str(exc)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit] + "…"


def _status(exc: Exception) -> int:
    resp = getattr(exc, "response", None) or {}
    return int((resp.get("ResponseMetadata") or {}).get("HTTPStatusCode", 0) or 0)


class S3Store:
    """One bucket of one endpoint, with the credentials of the standard AWS chain."""

    def __init__(self, ucfg: UploadConfig, client: Any = None):
        import boto3
        from botocore.config import Config

        self.cfg = ucfg
        self.endpoint = ucfg.endpoint_url or "AWS S3"
        session = boto3.session.Session()
        creds = session.get_credentials()
        self.key_id = creds.access_key if creds is not None else "(no credentials found)"
        self.client = client or session.client(
            "s3", endpoint_url=ucfg.endpoint_url or None, region_name=ucfg.region,
            config=Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=3,
                          read_timeout=60))

    # -------------------------------------------------------------- errors

    def _where(self, op: str, key: str = "") -> str:
        return f"S3 at {self.endpoint}: {op} s3://{self.cfg.bucket}/{key}"

    def _raise(self, exc: Exception, op: str, key: str = "") -> None:
        """Turn any error of a request into ours, one line: unreachable (back off), auth
        (stop), anything else a :class:`StoreError` naming endpoint, operation, bucket, key."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            HTTPClientError,
            NoCredentialsError,
        )
        from botocore.exceptions import ConnectionError as BotoConnectionError

        where = self._where(op, key)
        if isinstance(exc, NoCredentialsError):
            raise StoreAuthError(f"{where}: no credentials in the AWS chain "
                                 "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, ~/.aws)") from None
        if isinstance(exc, ClientError):
            code, status = _code(exc), _status(exc)
            if code in AUTH_CODES or status == 403:
                raise StoreAuthError(
                    f"{where}: refused access key id {self.key_id} ({code or status}): check "
                    "the secret key configured for this key id") from None
            if status >= 500:
                raise StoreUnreachable(f"{where}: HTTP {status} {code}") from None
            raise StoreError(f"{where}: HTTP {status} {code or 'error'}: "
                             f"{_one_line(_message(exc))}") from None
        if isinstance(exc, (BotoConnectionError, HTTPClientError)):
            raise StoreUnreachable(f"{where}: {type(exc).__name__}") from None
        if isinstance(exc, BotoCoreError):  # refused before sending (a bad parameter)
            raise StoreError(f"{where}: {type(exc).__name__}: {_one_line(str(exc))}") from None
        raise exc

    def ensure_bucket(self) -> None:
        try:
            self.client.head_bucket(Bucket=self.cfg.bucket)
        except Exception as exc:  # noqa: BLE001 - classified below
            if _status(exc) == 404 or _code(exc) in ("404", "NoSuchBucket"):
                try:
                    self.client.create_bucket(Bucket=self.cfg.bucket)
                except Exception as exc2:  # noqa: BLE001
                    if _code(exc2) not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                        self._raise(exc2, "create_bucket")
                return
            self._raise(exc, "head_bucket")

    # -------------------------------------------------------------- objects

    def head(self, key: str) -> dict | None:
        try:
            return self.client.head_object(Bucket=self.cfg.bucket, Key=key,
                                           ChecksumMode="ENABLED")
        except Exception as exc:  # noqa: BLE001
            if _status(exc) == 404 or _code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            self._raise(exc, "head_object", key)
        return None

    def matches(self, key: str, want: Digest) -> bool | None:
        """True: the object has these bytes; False: other bytes; None: no object."""
        h = self.head(key)
        if h is None:
            return None
        return int(h["ContentLength"]) == want.size and h.get("ChecksumSHA256") == want.checksum

    def put_file(self, path: Path, key: str, want: Digest) -> bool:
        """Write ``path`` under ``key`` unless an object is there; True if we wrote it."""
        try:
            self._abort_stale(key)
            if not want.parts:
                with open(path, "rb") as f:
                    self.client.put_object(Bucket=self.cfg.bucket, Key=key, Body=f,
                                           ChecksumSHA256=want.checksum, IfNoneMatch="*")
                return True
            return self._put_multipart(path, key, want)
        except Exception as exc:  # noqa: BLE001
            if _status(exc) == 412 or _code(exc) == "PreconditionFailed":
                return False  # someone (an earlier run of ours) wrote it: the caller verifies
            self._raise(exc, "put_object", key)
        return False

    def _put_multipart(self, path: Path, key: str, want: Digest) -> bool:
        part = self.cfg.part_mb * 2**20
        up = self.client.create_multipart_upload(Bucket=self.cfg.bucket, Key=key,
                                                 ChecksumAlgorithm="SHA256")
        uid, done = up["UploadId"], []
        with open(path, "rb") as f:
            for i, digest in enumerate(want.parts, start=1):
                r = self.client.upload_part(Bucket=self.cfg.bucket, Key=key, UploadId=uid,
                                            PartNumber=i, Body=f.read(part),
                                            ChecksumAlgorithm="SHA256", ChecksumSHA256=digest)
                done.append({"PartNumber": i, "ETag": r["ETag"], "ChecksumSHA256": digest})
        self.client.complete_multipart_upload(Bucket=self.cfg.bucket, Key=key, UploadId=uid,
                                              MultipartUpload={"Parts": done}, IfNoneMatch="*")
        return True

    def _abort_stale(self, key: str) -> None:
        """Abort multipart uploads of ``key`` a killed uploader left (never an object)."""
        r = self.client.list_multipart_uploads(Bucket=self.cfg.bucket, Prefix=key)
        for u in r.get("Uploads", []):
            if u["Key"] == key:
                self.client.abort_multipart_upload(Bucket=self.cfg.bucket, Key=key,
                                                   UploadId=u["UploadId"])

    def put_verified(self, path: Path, key: str) -> tuple[Digest, bool]:
        """Upload (if absent) and verify; (digest, written by this call). Raises
        StoreConflict when the key holds other bytes; then the local file must stay."""
        mp = self.cfg.multipart_mb * 2**20
        want = file_digest(path, mp, self.cfg.part_mb * 2**20)
        state = self.matches(key, want)
        if state is True:
            return want, False  # verified by an earlier run (crash before the local delete)
        wrote = False
        if state is None:
            wrote = self.put_file(path, key, want)
        if not self.cfg.verify and wrote:
            return want, wrote
        if self.matches(key, want) is not True:
            raise StoreConflict(f"s3://{self.cfg.bucket}/{key}: the stored object does not "
                                f"match {path} (size {want.size}, sha256 {want.sha256[:12]}…); "
                                "kept locally, never overwritten")
        return want, wrote

    def put_bytes(self, data: bytes, key: str) -> bool:
        """A small object (a completion record) written once and verified."""
        dg = base64.b64encode(hashlib.sha256(data).digest()).decode()
        try:
            self.client.put_object(Bucket=self.cfg.bucket, Key=key, Body=data,
                                   ChecksumSHA256=dg, IfNoneMatch="*")
            wrote = True
        except Exception as exc:  # noqa: BLE001
            if not (_status(exc) == 412 or _code(exc) == "PreconditionFailed"):
                self._raise(exc, "put_object", key)
            wrote = False
        h = self.head(key)
        if h is None or int(h["ContentLength"]) != len(data) or h.get("ChecksumSHA256") != dg:
            raise StoreConflict(f"s3://{self.cfg.bucket}/{key}: stored record differs")
        return wrote

    def list_keys(self, prefix: str) -> list[str]:
        out: list[str] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.cfg.bucket, Prefix=prefix)
            for page in pages:
                out += [o["Key"] for o in page.get("Contents", [])]
        except Exception as exc:  # noqa: BLE001
            if _code(exc) == "NoSuchBucket":
                return []
            self._raise(exc, "list_objects_v2", prefix)
        return out

    def get_bytes(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.cfg.bucket, Key=key)["Body"].read()
        except Exception as exc:  # noqa: BLE001
            self._raise(exc, "get_object", key)
        return b""

    def get_json(self, key: str) -> dict | None:
        """A small JSON object (a delivery record), or None when there is none."""
        try:
            body = self.client.get_object(Bucket=self.cfg.bucket, Key=key)["Body"].read()
        except Exception as exc:  # noqa: BLE001
            if _status(exc) == 404 or _code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            self._raise(exc, "get_object", key)
            return None
        try:
            return dict(json.loads(body))
        except ValueError:
            raise StoreError(f"{self._where('get_object', key)}: not a JSON record") from None

    def create(self, data: bytes, key: str) -> bool:
        """Write a small object only if the key is free (``If-None-Match: *``); True when this
        call wrote it, False when another writer had (HTTP 412). Never overwrites."""
        dg = base64.b64encode(hashlib.sha256(data).digest()).decode()
        try:
            self.client.put_object(Bucket=self.cfg.bucket, Key=key, Body=data,
                                   ChecksumSHA256=dg, IfNoneMatch="*")
        except Exception as exc:  # noqa: BLE001
            if _status(exc) == 412 or _code(exc) == "PreconditionFailed":
                return False
            self._raise(exc, "put_object", key)
        return True

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.cfg.bucket, Key=key)
        except Exception as exc:  # noqa: BLE001
            self._raise(exc, "delete_object", key)
