//! One compare-and-swap edit of a ref, in our terms: what every ref write above the store is
//! made of, whichever backend ([`super::tx`] for files, [`super::update_ref`] for reftable)
//! carries it out.

use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::{FullName, Target};

use crate::error::{Error, Result};

/// One compare-and-swap edit, in our terms.
#[derive(Debug, Clone)]
pub struct Cas {
    pub name: String,
    /// `None`: the ref must not exist yet.
    pub expected: Option<gix::ObjectId>,
    /// `None`: delete the ref.
    pub new: Option<gix::ObjectId>,
    pub message: String,
}

impl Cas {
    pub fn update(
        name: impl Into<String>,
        expected: Option<gix::ObjectId>,
        new: gix::ObjectId,
        message: impl Into<String>,
    ) -> Self {
        Cas {
            name: name.into(),
            expected,
            new: Some(new),
            message: message.into(),
        }
    }
    pub fn delete(
        name: impl Into<String>,
        expected: gix::ObjectId,
        message: impl Into<String>,
    ) -> Self {
        Cas {
            name: name.into(),
            expected: Some(expected),
            new: None,
            message: message.into(),
        }
    }

    pub(super) fn to_edit(&self) -> Result<RefEdit> {
        let name = FullName::try_from(self.name.as_str()).map_err(|e| {
            Error::usage(format!("{:?} is not a valid ref name: {e:#}", self.name)).caused_by(e)
        })?;
        let expected = match self.expected {
            Some(id) => PreviousValue::MustExistAndMatch(Target::Object(id)),
            None => PreviousValue::MustNotExist,
        };
        let change = match self.new {
            Some(new) => Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: false,
                    message: self.message.clone().into(),
                },
                expected,
                new: Target::Object(new),
            },
            None => Change::Delete {
                expected,
                log: RefLog::AndReference,
            },
        };
        Ok(RefEdit {
            change,
            name,
            deref: false,
        })
    }
}
