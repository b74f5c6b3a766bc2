//! What the S3 sink and the S3 anchor store share, and nothing else: the
//! settings and the client built from them ([`settings`]), sorting SDK
//! errors by kind ([`failure`]), `s3://BUCKET/PREFIX` and where an origin's
//! keys live under it ([`location`]), and reading, listing and write-once
//! uploading objects ([`object`], [`upload`]). Neither user depends on the
//! other: the anchor store is built without librdkafka.

pub mod failure;
pub mod location;
pub mod object;
pub mod settings;
pub mod upload;

pub use failure::{HttpStatus, S3Failure, classify};
pub use location::{S3Location, origin_prefix};
pub use object::{get_object, list_keys, visit_folders, visit_keys};
pub use settings::S3Settings;
pub use upload::{MIN_PART_SIZE, NewObject, PartPlan, abort_leftovers, put_replacing, upload_new};
