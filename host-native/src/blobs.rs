//! Blob files, content-addressed by SHA-256 under the data directory:
//! `blobs/<first 2 hex>/<hash>`. An upload streams to a temporary file,
//! hashing as it goes, is fsynced, and renamed into place; a file is shared
//! by every store that uploaded the same bytes.

use std::path::PathBuf;

use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::sync::{Mutex, MutexGuard};

/// Why an upload failed.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("the body is {got} bytes, not the {declared} its Content-Length declares")]
    LengthMismatch { declared: u64, got: u64 },
    #[error("reading the body: {0}")]
    Body(axum::Error),
    #[error("blob storage: {0}")]
    Io(#[from] std::io::Error),
}

/// A stored upload: its hash and size.
#[derive(Debug, Clone)]
pub struct Uploaded {
    pub hash: String,
    pub size: u64,
}

/// The blob files.
pub struct BlobStore {
    root: PathBuf,
    /// Held while a file is put in place and its row written, and while an
    /// expired file is removed, so a collection never removes a file that
    /// an upload has just stored again.
    placing: Mutex<()>,
}

impl BlobStore {
    pub fn new(root: PathBuf) -> Self {
        BlobStore {
            root,
            placing: Mutex::new(()),
        }
    }

    /// The path of a blob's file (the hash is 64 hex characters, checked by the caller's type).
    pub fn path(&self, hash: &str) -> PathBuf {
        self.root.join(&hash[..2]).join(hash)
    }

    pub async fn lock(&self) -> MutexGuard<'_, ()> {
        self.placing.lock().await
    }

    /// Streams a body into a temporary file, checking its length; returns
    /// the temporary file's path with the hash and size.
    pub async fn receive(
        &self,
        body: axum::body::Body,
        declared: u64,
    ) -> Result<(PathBuf, Uploaded), UploadError> {
        let tmp = self
            .root
            .join("tmp")
            .join(hex::encode(rand::random::<[u8; 16]>()));
        let result = async {
            let mut file = tokio::fs::File::create(&tmp).await?;
            let mut hasher = Sha256::new();
            let mut size = 0u64;
            let mut stream = body.into_data_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(UploadError::Body)?;
                size += chunk.len() as u64;
                if size > declared {
                    return Err(UploadError::LengthMismatch {
                        declared,
                        got: size,
                    });
                }
                hasher.update(&chunk);
                file.write_all(&chunk).await?;
            }
            if size != declared {
                return Err(UploadError::LengthMismatch {
                    declared,
                    got: size,
                });
            }
            file.sync_all().await?;
            Ok(Uploaded {
                hash: hex::encode(hasher.finalize()),
                size,
            })
        }
        .await;
        match result {
            Ok(uploaded) => Ok((tmp, uploaded)),
            Err(error) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                Err(error)
            }
        }
    }

    /// Moves a received file into place (call with [`BlobStore::lock`] held).
    pub async fn place(&self, tmp: PathBuf, hash: &str) -> Result<(), std::io::Error> {
        let path = self.path(hash);
        let dir = path.parent().map(PathBuf::from).unwrap_or_default();
        tokio::fs::create_dir_all(&dir).await?;
        if tokio::fs::try_exists(&path).await? {
            tokio::fs::remove_file(&tmp).await?;
            return Ok(());
        }
        tokio::fs::rename(&tmp, &path).await?;
        // The rename itself must reach the disk before the row that names it.
        tokio::fs::File::open(&dir).await?.sync_all().await?;
        Ok(())
    }

    /// Removes a blob's file (call with [`BlobStore::lock`] held).
    pub async fn remove(&self, hash: &str) -> Result<(), std::io::Error> {
        match tokio::fs::remove_file(self.path(hash)).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}
