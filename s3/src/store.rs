//! [`S3Store`]: a [`ResultStore`] in an S3 bucket (AWS or any S3-compatible server).

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::ops::Range;
use std::time::Duration;

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use aws_sdk_s3::Client;
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use lightsout_api::{S3Connection, StorageSpec};
use lightsout_core::results::ResultStore;

use crate::retry::RetryPolicy;

/// The region used when the connection names none.
pub const DEFAULT_REGION: &str = "us-east-1";
/// The size above which [`S3Store::put`](ResultStore::put) uses a multipart upload, and the
/// size of its parts.
pub const DEFAULT_MULTIPART_THRESHOLD: usize = 8 * 1024 * 1024;
/// S3's smallest part (all but the last part of a multipart upload must be at least this big).
pub const MIN_PART_SIZE: usize = 5 * 1024 * 1024;
/// S3's most parts in one multipart upload.
const MAX_PARTS: usize = 10_000;

/// An access key for S3.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    /// For temporary credentials.
    pub session_token: Option<String>,
}

impl S3Credentials {
    pub fn new(access_key_id: impl Into<String>, secret_access_key: impl Into<String>) -> Self {
        S3Credentials {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            session_token: None,
        }
    }

    /// From `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN` when set):
    /// how a trial pod receives the Secret named by `S3Connection::secret_name`.
    pub fn from_env() -> io::Result<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
            (Some(access_key_id), Some(secret_access_key)) => {
                Ok(S3Credentials { access_key_id, secret_access_key, session_token: var("AWS_SESSION_TOKEN") })
            }
            (id, _) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no S3 credentials: {} is not set (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, e.g. from the \
                     Secret named by storage.s3.secretName)",
                    if id.is_none() { "AWS_ACCESS_KEY_ID" } else { "AWS_SECRET_ACCESS_KEY" }
                ),
            )),
        }
    }
}

impl fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("session_token", &self.session_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// How an [`S3Store`] calls S3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Options {
    /// Retries of every call (each part of a multipart upload is retried on its own).
    pub retry: RetryPolicy,
    /// Objects bigger than this are uploaded in parts of this size (raised to S3's 5 MiB
    /// minimum, and as needed to stay within 10,000 parts).
    pub multipart_threshold: usize,
    /// Parts uploaded at once.
    pub multipart_concurrency: usize,
    /// Keys per `ListObjectsV2` page; the server's default (1,000 on S3) when `None`.
    pub list_page_size: Option<i32>,
    /// Time allowed to open a connection.
    pub connect_timeout: Duration,
    /// Time allowed for one HTTP request until its response starts.
    pub attempt_timeout: Duration,
}

impl Default for S3Options {
    fn default() -> Self {
        S3Options {
            retry: RetryPolicy::default(),
            multipart_threshold: DEFAULT_MULTIPART_THRESHOLD,
            multipart_concurrency: 4,
            list_page_size: None,
            connect_timeout: Duration::from_secs(10),
            attempt_timeout: Duration::from_secs(120),
        }
    }
}

/// Results under `s3://bucket/prefix`: the store's key `k` is the object `prefix/k`.
///
/// Every call retries transient failures per [`S3Options::retry`]; errors are `io::Error`s whose
/// message, one line, names the operation and the `s3://` URI and gives S3's error code and
/// message (or the transport's causes). Kinds: `PermissionDenied` (403),
/// `NotFound` (404, e.g. no such bucket), `InvalidInput` (another 4xx, or a bad key),
/// `TimedOut` and the connection kinds for transport failures, `Other` otherwise.
#[derive(Clone)]
pub struct S3Store {
    client: Client,
    bucket: String,
    prefix: String,
    options: S3Options,
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Whether requests name the bucket in the path (`ENDPOINT/BUCKET/KEY`): `forcePathStyle` when
/// set; unset, whenever a custom endpoint is. Virtual-hosted addressing puts the bucket in the
/// host name (`BUCKET.s3.NS.svc:5000`), which a server reached by one name of its own (an
/// in-cluster Service, `localhost`, an IP) cannot answer: the name does not resolve, or the
/// server reads its own name's first label as the bucket. On AWS (no endpoint) virtual-hosted
/// is the default, as AWS wants.
pub fn path_style(connection: &S3Connection) -> bool {
    connection.force_path_style.unwrap_or_else(|| connection.endpoint.as_deref().is_some_and(|e| !e.is_empty()))
}

/// Splits `s3://bucket/prefix` into the bucket and the prefix (without slashes at its ends).
pub fn parse_s3_uri(uri: &str) -> io::Result<(String, String)> {
    let invalid = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("results URI {uri:?}: {why}"));
    let rest = uri.strip_prefix("s3://").ok_or_else(|| invalid("not an s3:// URI"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(invalid("no bucket"));
    }
    Ok((bucket.to_string(), prefix.trim_matches('/').to_string()))
}

impl S3Store {
    /// The store for `uri` (`s3://bucket/prefix`) on the endpoint of `connection` (AWS when it
    /// names none; region `us-east-1` by default), signing with `credentials`, or with
    /// [`S3Credentials::from_env`] when `None`. Makes no request.
    pub fn new(
        uri: &str,
        connection: &S3Connection,
        credentials: Option<S3Credentials>,
        options: S3Options,
    ) -> io::Result<Self> {
        let (bucket, prefix) = parse_s3_uri(uri)?;
        let credentials = match credentials {
            Some(credentials) => credentials,
            None => S3Credentials::from_env()?,
        };
        let http_client =
            aws_smithy_http_client::Builder::new().tls_provider(Provider::Rustls(CryptoMode::Ring)).build_https();
        let region = connection.region.clone().filter(|r| !r.is_empty()).unwrap_or_else(|| DEFAULT_REGION.into());
        let mut config = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(http_client)
            .region(Region::new(region))
            .credentials_provider(Credentials::new(
                credentials.access_key_id,
                credentials.secret_access_key,
                credentials.session_token,
                None,
                "lightsout",
            ))
            .force_path_style(path_style(connection))
            // Retries are ours (`S3Options::retry`), so that one policy covers every call,
            // including reading a body and each part of a multipart upload.
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(options.connect_timeout)
                    .operation_attempt_timeout(options.attempt_timeout)
                    .build(),
            );
        if let Some(endpoint) = connection.endpoint.as_deref().filter(|e| !e.is_empty()) {
            config = config.endpoint_url(endpoint);
        }
        Ok(S3Store { client: Client::from_conf(config.build()), bucket, prefix, options })
    }

    /// The store for `storage.results` with the connection `storage.s3` (defaults when absent).
    pub fn for_storage(
        storage: &StorageSpec,
        credentials: Option<S3Credentials>,
        options: S3Options,
    ) -> io::Result<Self> {
        let default = S3Connection { endpoint: None, region: None, secret_name: None, force_path_style: None };
        S3Store::new(&storage.results, storage.s3.as_ref().unwrap_or(&default), credentials, options)
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The prefix of every object, without slashes at its ends (empty for the bucket's root).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn options(&self) -> &S3Options {
        &self.options
    }

    /// The SDK client, for what the store does not do (creating a bucket, say).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The object key of the store's `key`.
    pub fn object_key(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}/{key}", self.prefix)
        }
    }

    fn checked_object_key(&self, key: &str) -> io::Result<String> {
        if key.is_empty() || key.starts_with('/') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("S3 key {key:?} in s3://{}/{}: keys are relative and non-empty", self.bucket, self.prefix),
            ));
        }
        Ok(self.object_key(key))
    }

    fn object_uri(&self, object: &str) -> String {
        format!("s3://{}/{object}", self.bucket)
    }

    fn io_error(&self, op: &str, object: &str, failure: Failure, attempts: u32) -> io::Error {
        let tries = if attempts == 1 { "1 attempt".to_string() } else { format!("{attempts} attempts") };
        io::Error::new(
            failure.kind,
            format!(
                "S3 {op} {} (bucket {}) failed after {tries}: {}",
                self.object_uri(object),
                self.bucket,
                failure.detail
            ),
        )
    }

    /// Runs one S3 request with the store's retry policy; a failure names the operation, the
    /// object and the tries made.
    async fn retried<T, F, Fut>(&self, op: &str, object: &str, request: F) -> io::Result<T>
    where
        F: FnMut(u32) -> Fut,
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        self.options
            .retry
            .run(request, Failure::is_transient)
            .await
            .map_err(|(failure, attempts)| self.io_error(op, object, failure, attempts))
    }

    async fn put_single(&self, object: &str, body: Bytes) -> io::Result<()> {
        let content_type = content_type(object);
        self.retried("PutObject", object, |_| {
            let request = self
                .client
                .put_object()
                .bucket(&self.bucket)
                .key(object)
                .content_type(content_type)
                .body(ByteStream::from(body.clone()));
            async move { request.send().await.map(drop).map_err(Failure::sdk) }
        })
        .await
    }

    async fn put_multipart(&self, object: &str, body: Bytes) -> io::Result<()> {
        let upload_id = self
            .retried("CreateMultipartUpload", object, |_| {
                let request = self
                    .client
                    .create_multipart_upload()
                    .bucket(&self.bucket)
                    .key(object)
                    .content_type(content_type(object));
                async move {
                    let output = request.send().await.map_err(Failure::sdk)?;
                    output.upload_id.ok_or_else(|| Failure::permanent("the response has no UploadId"))
                }
            })
            .await?;

        // Aborts the upload if this future is dropped before it completes or aborts it itself.
        let mut guard = AbortOnDrop {
            client: self.client.clone(),
            bucket: self.bucket.clone(),
            object: object.to_string(),
            upload_id: upload_id.clone(),
            armed: true,
        };
        let result = self.upload_parts_and_complete(object, &upload_id, body).await;
        if result.is_err() {
            let abort = self
                .options
                .retry
                .run(
                    |_| {
                        let request =
                            self.client.abort_multipart_upload().bucket(&self.bucket).key(object).upload_id(&upload_id);
                        async move { request.send().await.map(drop).map_err(Failure::sdk) }
                    },
                    Failure::is_transient,
                )
                .await;
            if let Err((failure, _)) = abort {
                tracing::warn!(
                    uri = %self.object_uri(object), upload_id, error = %failure.detail,
                    "could not abort a failed multipart upload; a bucket lifecycle rule must clean it up"
                );
            }
        }
        guard.armed = false;
        result
    }

    async fn upload_parts_and_complete(&self, object: &str, upload_id: &str, body: Bytes) -> io::Result<()> {
        let ranges = part_ranges(body.len(), self.options.multipart_threshold);
        let parts: Vec<CompletedPart> = futures::stream::iter(ranges.into_iter().enumerate())
            .map(|(index, range)| {
                let part_number = index as i32 + 1;
                let part = body.slice(range);
                async move {
                    self.retried(&format!("UploadPart {part_number}"), object, |_| {
                        let request = self
                            .client
                            .upload_part()
                            .bucket(&self.bucket)
                            .key(object)
                            .upload_id(upload_id)
                            .part_number(part_number)
                            .body(ByteStream::from(part.clone()));
                        async move {
                            let output = request.send().await.map_err(Failure::sdk)?;
                            Ok(CompletedPart::builder()
                                .part_number(part_number)
                                .set_e_tag(output.e_tag)
                                .set_checksum_crc32(output.checksum_crc32)
                                .set_checksum_crc32_c(output.checksum_crc32_c)
                                .set_checksum_crc64_nvme(output.checksum_crc64_nvme)
                                .set_checksum_sha1(output.checksum_sha1)
                                .set_checksum_sha256(output.checksum_sha256)
                                .build())
                        }
                    })
                    .await
                }
            })
            .buffered(self.options.multipart_concurrency.max(1))
            .try_collect()
            .await?;

        let size = body.len() as i64;
        let completed = CompletedMultipartUpload::builder().set_parts(Some(parts)).build();
        self.retried("CompleteMultipartUpload", object, |attempt| {
            let request = self
                .client
                .complete_multipart_upload()
                .bucket(&self.bucket)
                .key(object)
                .upload_id(upload_id)
                .multipart_upload(completed.clone());
            async move {
                match request.send().await {
                    Ok(_) => Ok(()),
                    // An earlier try completed the upload but its response was lost.
                    Err(e) if attempt > 1 && e.code() == Some("NoSuchUpload") => {
                        match self.client.head_object().bucket(&self.bucket).key(object).send().await {
                            Ok(head) if head.content_length == Some(size) => Ok(()),
                            _ => Err(Failure::sdk(e)),
                        }
                    }
                    Err(e) => Err(Failure::sdk(e)),
                }
            }
        })
        .await
    }

    async fn list_page(&self, prefix: &str, token: Option<String>) -> io::Result<(Vec<String>, Option<String>)> {
        self.retried("ListObjectsV2", prefix, |_| {
            let request = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_max_keys(self.options.list_page_size)
                .set_continuation_token(token.clone());
            async move {
                let output = request.send().await.map_err(Failure::sdk)?;
                let keys = output.contents.unwrap_or_default().into_iter().filter_map(|o| o.key).collect();
                let next = if output.is_truncated == Some(true) { output.next_continuation_token } else { None };
                Ok((keys, next))
            }
        })
        .await
    }
}

impl ResultStore for S3Store {
    async fn put(&self, key: &str, bytes: &[u8]) -> io::Result<()> {
        let object = self.checked_object_key(key)?;
        let body = Bytes::copy_from_slice(bytes);
        if bytes.len() > self.options.multipart_threshold {
            self.put_multipart(&object, body).await
        } else {
            self.put_single(&object, body).await
        }
    }

    async fn get(&self, key: &str) -> io::Result<Option<Vec<u8>>> {
        let object = self.checked_object_key(key)?;
        self.retried("GetObject", &object, |_| {
            let request = self.client.get_object().bucket(&self.bucket).key(&object);
            async move {
                let output = match request.send().await {
                    Ok(output) => output,
                    Err(e) if is_missing_key(&e) => return Ok(None),
                    Err(e) => return Err(Failure::sdk(e)),
                };
                // A body cut short is retried like a failed request.
                let body = output.body.collect().await.map_err(|e| Failure::transient(&e))?;
                Ok(Some(body.into_bytes().to_vec()))
            }
        })
        .await
    }

    /// The keys under `prefix` taken as a directory (`runs/a` holds `runs/a/x`, not `runs/ab`),
    /// recursively and sorted, relative to the store's prefix like every key.
    async fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        let directory = prefix.trim_matches('/');
        let mut object_prefix = self.object_key(directory);
        if !object_prefix.is_empty() && !object_prefix.ends_with('/') {
            object_prefix.push('/');
        }
        let strip = if self.prefix.is_empty() { String::new() } else { format!("{}/", self.prefix) };
        let mut keys = Vec::new();
        let mut token = None;
        loop {
            let (page, next) = self.list_page(&object_prefix, token).await?;
            keys.extend(page.into_iter().filter_map(|object| object.strip_prefix(&strip).map(str::to_string)));
            match next {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    fn uri(&self, key: &str) -> String {
        self.object_uri(&self.object_key(key))
    }
}

/// Aborts a multipart upload when dropped armed (the `put` future was cancelled mid-upload).
struct AbortOnDrop {
    client: Client,
    bucket: String,
    object: String,
    upload_id: String,
    armed: bool,
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let request =
            self.client.abort_multipart_upload().bucket(&self.bucket).key(&self.object).upload_id(&self.upload_id);
        runtime.spawn(async move {
            let _ = request.send().await;
        });
    }
}

/// The byte ranges of the parts of an object of `len` bytes.
fn part_ranges(len: usize, threshold: usize) -> Vec<Range<usize>> {
    let part_size = threshold.max(MIN_PART_SIZE).max(len.div_ceil(MAX_PARTS));
    (0..len).step_by(part_size).map(|start| start..(start + part_size).min(len)).collect()
}

fn content_type(object: &str) -> &'static str {
    match object.rsplit_once('.').map(|(_, ext)| ext) {
        Some("json") => "application/json",
        Some("jsonl") => "application/x-ndjson",
        Some("md") => "text/markdown; charset=utf-8",
        Some("txt" | "log" | "diff" | "patch") => "text/plain; charset=utf-8",
        Some("yaml" | "yml") => "application/yaml",
        _ => "application/octet-stream",
    }
}

fn is_missing_key(error: &SdkError<aws_sdk_s3::operation::get_object::GetObjectError>) -> bool {
    match error {
        SdkError::ServiceError(service) => {
            service.err().is_no_such_key()
                || (service.raw().status().as_u16() == 404
                    && matches!(service.err().code(), None | Some("NoSuchKey" | "NotFound")))
        }
        _ => false,
    }
}

/// Error codes S3 and compatible servers use for throttling and transient faults.
const TRANSIENT_CODES: &[&str] = &[
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "ProvisionedThroughputExceededException",
    "RequestTimeout",
    "RequestTimeoutException",
    "RequestTimeTooSkewed",
    "InternalError",
    "ServiceUnavailable",
    "PriorRequestNotComplete",
];

/// One failed try, classified.
#[derive(Debug)]
struct Failure {
    transient: bool,
    kind: io::ErrorKind,
    detail: String,
}

impl Failure {
    fn is_transient(&self) -> bool {
        self.transient
    }

    fn permanent(detail: &str) -> Self {
        Failure { transient: false, kind: io::ErrorKind::InvalidData, detail: detail.to_string() }
    }

    fn transient(error: &(dyn StdError + 'static)) -> Self {
        Failure { transient: true, kind: io_kind_in(error).unwrap_or(io::ErrorKind::Other), detail: causes(error) }
    }

    fn sdk<E>(error: SdkError<E>) -> Self
    where
        E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
    {
        let (transient, kind) = match &error {
            SdkError::ConstructionFailure(_) => (false, io::ErrorKind::InvalidInput),
            SdkError::TimeoutError(_) => (true, io::ErrorKind::TimedOut),
            SdkError::DispatchFailure(dispatch) if dispatch.is_user() => (false, io::ErrorKind::InvalidInput),
            SdkError::DispatchFailure(dispatch) if dispatch.is_timeout() => (true, io::ErrorKind::TimedOut),
            SdkError::DispatchFailure(_) => (true, io_kind_in(&error).unwrap_or(io::ErrorKind::Other)),
            // The response could not be read or parsed: most often a connection cut mid-way.
            SdkError::ResponseError(_) => (true, io_kind_in(&error).unwrap_or(io::ErrorKind::Other)),
            SdkError::ServiceError(service) => {
                let status = service.raw().status().as_u16();
                let code = service.err().code();
                if status >= 500 || status == 429 || code.is_some_and(|c| TRANSIENT_CODES.contains(&c)) {
                    (true, io::ErrorKind::Other)
                } else {
                    let kind = match status {
                        401 | 403 => io::ErrorKind::PermissionDenied,
                        404 => io::ErrorKind::NotFound,
                        400..=499 => io::ErrorKind::InvalidInput,
                        _ => io::ErrorKind::Other,
                    };
                    (false, kind)
                }
            }
            _ => (false, io::ErrorKind::Other),
        };
        Failure { transient, kind, detail: one_line(&error) }
    }
}

/// The longest detail an error carries (a cause chain can be long; the rest adds nothing).
const MAX_DETAIL: usize = 300;

/// A failed request in one line: when S3 answered, its error code and message and the HTTP
/// status (`NoSuchBucket: The specified bucket does not exist (HTTP 404)`); otherwise the chain of
/// causes (`dispatch failure: … Connection refused`). Never the SDK's `Debug` rendering, which
/// puts the whole response (metadata, headers, body: kilobytes) into every log line and
/// condition that shows the error.
fn one_line<E>(error: &SdkError<E>) -> String
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let SdkError::ServiceError(service) = error else { return causes(error) };
    let status = service.raw().status().as_u16();
    let text = match (service.err().code(), service.err().message()) {
        (Some(code), Some(message)) => format!("{code}: {message} (HTTP {status})"),
        (Some(code), None) => format!("{code} (HTTP {status})"),
        (None, Some(message)) => format!("HTTP {status}: {message}"),
        (None, None) => format!("HTTP {status}"),
    };
    clipped(&text)
}

/// `error` and its sources, each in its own words, joined by `: ` on one line (a cause that
/// only repeats the previous one is left out).
fn causes(error: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = Some(error);
    while let Some(error) = current {
        let text = error.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
        if !text.is_empty() && !parts.last().is_some_and(|last| last.contains(&text)) {
            parts.push(text);
        }
        current = error.source();
    }
    clipped(&parts.join(": "))
}

/// `text` on one line, cut at [`MAX_DETAIL`] bytes (on a character boundary) with `…`.
fn clipped(text: &str) -> String {
    let text = text.replace(['\n', '\r'], " ");
    if text.len() <= MAX_DETAIL {
        return text;
    }
    let cut = (0..=MAX_DETAIL).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
    format!("{}…", &text[..cut])
}

/// The kind of the first `io::Error` in `error`'s chain of sources (a refused connection, say).
fn io_kind_in(error: &(dyn StdError + 'static)) -> Option<io::ErrorKind> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(io) = error.downcast_ref::<io::Error>() {
            return Some(io.kind());
        }
        current = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_s3_uris() {
        assert_eq!(parse_s3_uri("s3://b/p/q/").unwrap(), ("b".into(), "p/q".into()));
        assert_eq!(parse_s3_uri("s3://b").unwrap(), ("b".into(), "".into()));
        assert_eq!(parse_s3_uri("s3://b/").unwrap(), ("b".into(), "".into()));
        assert!(parse_s3_uri("s3:///p").is_err());
        assert!(parse_s3_uri("file:///tmp").is_err());
    }

    #[test]
    fn custom_endpoints_are_path_style_unless_the_connection_says_otherwise() {
        let connection = |endpoint: Option<&str>, force_path_style: Option<bool>| S3Connection {
            endpoint: endpoint.map(str::to_string),
            region: None,
            secret_name: None,
            force_path_style,
        };
        let minio = Some("http://minio.storage.svc:9000");
        assert!(path_style(&connection(minio, None)));
        assert!(path_style(&connection(minio, Some(true))));
        assert!(!path_style(&connection(minio, Some(false))));
        assert!(!path_style(&connection(None, None)), "AWS: virtual-hosted");
        assert!(!path_style(&connection(Some(""), None)), "an empty endpoint is AWS");
        assert!(path_style(&connection(None, Some(true))));
    }

    #[test]
    fn error_details_are_one_short_line() {
        #[derive(Debug)]
        struct Layer(&'static str, Option<Box<Layer>>);
        impl fmt::Display for Layer {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.0)
            }
        }
        impl StdError for Layer {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                self.1.as_deref().map(|e| e as &(dyn StdError + 'static))
            }
        }
        let chain = Layer("dispatch failure", Some(Box::new(Layer("io error:\n  refused", None))));
        assert_eq!(causes(&chain), "dispatch failure: io error: refused");
        let repeated = Layer("timeout: after 5s", Some(Box::new(Layer("after 5s", None))));
        assert_eq!(causes(&repeated), "timeout: after 5s");
        let long = "é".repeat(MAX_DETAIL);
        let cut = clipped(&long);
        assert!(cut.ends_with('…') && cut.len() <= MAX_DETAIL + '…'.len_utf8(), "{}", cut.len());
    }

    #[test]
    fn parts_are_at_least_5_mib_and_at_most_10000() {
        let mib = 1024 * 1024;
        let ranges = part_ranges(12 * mib, 5 * mib);
        assert_eq!(ranges, vec![0..5 * mib, 5 * mib..10 * mib, 10 * mib..12 * mib]);
        assert_eq!(part_ranges(12 * mib, mib).len(), 3, "raised to S3's 5 MiB minimum");
        let huge = 100_000 * 5 * mib;
        let ranges = part_ranges(huge, 5 * mib);
        assert!(ranges.len() <= MAX_PARTS);
        assert_eq!(ranges.last().unwrap().end, huge);
    }

    #[test]
    fn store_keys_sit_under_the_prefix() {
        let connection = S3Connection {
            endpoint: Some("http://127.0.0.1:9".into()),
            region: None,
            secret_name: None,
            force_path_style: Some(true),
        };
        let credentials = Some(S3Credentials::new("id", "secret"));
        let store =
            S3Store::new("s3://bucket/results/", &connection, credentials.clone(), S3Options::default()).unwrap();
        assert_eq!(store.prefix(), "results");
        assert_eq!(store.object_key("runs/a/run.json"), "results/runs/a/run.json");
        assert_eq!(store.uri("runs/a/run.json"), "s3://bucket/results/runs/a/run.json");
        let root = S3Store::new("s3://bucket", &connection, credentials, S3Options::default()).unwrap();
        assert_eq!(root.uri("k"), "s3://bucket/k");
        assert!(root.checked_object_key("/abs").is_err());
        assert!(root.checked_object_key("").is_err());
        assert!(!format!("{:?}", S3Credentials::new("id", "hunter2")).contains("hunter2"));
    }
}
