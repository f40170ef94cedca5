//! Lightsout's S3 results store ([`S3Store`]) and the spooling [`Uploader`] that writes a trial
//! attempt's artifacts to a store so that its `result.json` lands last.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use lightsout_api::S3Connection;
//! use lightsout_core::results::{ResultStore, RunLayout};
//! use lightsout_s3::{Artifact, S3Options, S3Store, Uploader};
//!
//! let connection = S3Connection {
//!     endpoint: Some("http://minio:9000".into()),
//!     region: None,
//!     secret_name: Some("results-s3".into()),
//!     force_path_style: None,
//! };
//! // Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
//! let store = S3Store::new("s3://results/lightsout", &connection, None, S3Options::default())?;
//! let layout = RunLayout::new("run-1");
//! let uploader = Uploader::new(store, "/var/spool/lightsout/run-1-v-t-1");
//! uploader
//!     .upload(vec![
//!         Artifact::new(layout.artifact("v", "t", 1, "review.md"), "# Review"),
//!         Artifact::new(layout.artifact("v", "t", 1, "result.json"), "{}"),
//!     ])
//!     .await?;
//! # Ok(())
//! # }
//! ```

pub mod results;
pub mod retry;
pub mod store;
pub mod uploader;

pub use aws_sdk_s3;
pub use results::Results;
pub use retry::RetryPolicy;
pub use store::{
    parse_s3_uri, path_style, S3Credentials, S3Options, S3Store, DEFAULT_MULTIPART_THRESHOLD, DEFAULT_REGION,
};
pub use uploader::{Artifact, UploadError, UploadReport, Uploader, DEFAULT_COMMIT};
