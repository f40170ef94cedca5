//! The results store that runs and the controller read and write: a local directory (`file://`)
//! or S3 (`s3://`), chosen by the results URI, behind one [`ResultStore`].

use std::io;
use std::path::Path;

use crate::{S3Credentials, S3Options, S3Store};
use lightsout_api::S3Connection;
use lightsout_core::results::{LocalStore, ResultStore};

#[derive(Debug, Clone)]
pub enum Results {
    Local(LocalStore),
    S3(S3Store),
}

impl Results {
    /// Opens the store for `uri`. S3 credentials come from `credentials`, or the standard
    /// `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` variables.
    pub fn open(
        uri: &str,
        connection: Option<&S3Connection>,
        credentials: Option<S3Credentials>,
    ) -> io::Result<Results> {
        if let Some(local) = LocalStore::from_uri(uri) {
            return Ok(Results::Local(local));
        }
        if uri.starts_with("s3://") {
            let default = S3Connection { endpoint: None, region: None, secret_name: None, force_path_style: None };
            let store = S3Store::new(uri, connection.unwrap_or(&default), credentials, S3Options::default())?;
            return Ok(Results::S3(store));
        }
        Err(io::Error::new(io::ErrorKind::InvalidInput, format!("results {uri}: must start with file:// or s3://")))
    }

    /// The local directory, when the results are on this machine.
    pub fn local_root(&self) -> Option<&Path> {
        match self {
            Results::Local(store) => Some(store.root()),
            Results::S3(_) => None,
        }
    }
}

impl ResultStore for Results {
    async fn put(&self, key: &str, bytes: &[u8]) -> io::Result<()> {
        match self {
            Results::Local(store) => store.put(key, bytes).await,
            Results::S3(store) => store.put(key, bytes).await,
        }
    }

    async fn get(&self, key: &str) -> io::Result<Option<Vec<u8>>> {
        match self {
            Results::Local(store) => store.get(key).await,
            Results::S3(store) => store.get(key).await,
        }
    }

    async fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        match self {
            Results::Local(store) => store.list(prefix).await,
            Results::S3(store) => store.list(prefix).await,
        }
    }

    fn uri(&self, key: &str) -> String {
        match self {
            Results::Local(store) => store.uri(key),
            Results::S3(store) => store.uri(key),
        }
    }

    fn needs_spool(&self) -> bool {
        match self {
            Results::Local(store) => store.needs_spool(),
            Results::S3(store) => store.needs_spool(),
        }
    }
}
