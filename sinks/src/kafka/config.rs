//! What a Kafka sink is told: brokers and topic from the URL, librdkafka
//! settings passed through, fencing and the partition; and the client
//! settings built from them (producer, consumer), and errors sorted by kind.

use chainship_chain::{Error, permanent};
use chainship_chain::{Setting, origin_segment};
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::error::SinkError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaConfig {
    pub brokers: String,
    pub topic: String,
    /// librdkafka settings passed through (TLS, SASL, compression, ...).
    pub options: Vec<(String, String)>,
    /// Fence other producers of this origin with a transactional id.
    pub fence: bool,
    /// Pin the partition (default: derived from the origin).
    pub partition: Option<i32>,
}

impl KafkaConfig {
    /// Parses `kafka://HOST:PORT[,HOST:PORT...]/TOPIC`, with default settings.
    pub fn from_url(url: &str) -> Result<Self, Error> {
        let rest = url
            .strip_prefix("kafka://")
            .ok_or_else(|| permanent!("expected kafka://HOST:PORT[,HOST:PORT...]/TOPIC"))?;
        let (brokers, topic) = rest
            .split_once('/')
            .ok_or_else(|| permanent!("kafka:// needs a /TOPIC after the brokers"))?;
        let topic_ok = !topic.is_empty()
            && topic.len() <= 249
            && topic.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !topic_ok {
            return Err(permanent!("topic {topic:?} is not a valid Kafka topic name"));
        }
        if brokers.is_empty() || brokers.split(',').any(|b| !b.contains(':')) {
            return Err(permanent!("brokers must be HOST:PORT[,HOST:PORT...]"));
        }
        Ok(KafkaConfig {
            brokers: brokers.to_owned(),
            topic: topic.to_owned(),
            options: Vec::new(),
            fence: true,
            partition: None,
        })
    }

    /// `kafka://BROKERS/TOPIC` (no settings: they may hold secrets).
    pub fn url(&self) -> String {
        format!("kafka://{}/{}", self.brokers, self.topic)
    }

    /// The passthrough settings without the producer-only ones, for
    /// consumers (librdkafka warns about those otherwise).
    pub(super) fn consumer_config(&self) -> ClientConfig {
        const PRODUCER_ONLY: [&str; 9] = [
            "message.timeout.ms",
            "delivery.timeout.ms",
            "linger.ms",
            "batch.",
            "queue.buffering",
            "compression",
            "retries",
            "retry.backoff",
            "transaction",
        ];
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.brokers);
        for (k, v) in self
            .options
            .iter()
            .filter(|(k, _)| !PRODUCER_ONLY.iter().any(|p| k.starts_with(p)))
        {
            config.set(k, v);
        }
        config
    }

    /// A consumer that reads one partition by assignment from a given
    /// offset to its end: no group joined, nothing committed, only
    /// committed transactions, and the end reported.
    pub(super) fn reader_config(&self, group: &str) -> ClientConfig {
        let mut config = self.consumer_config();
        // librdkafka prefetches up to 64 MiB into its queue plus 50 MiB a
        // fetch, and once the queue is full waits a whole second
        // (`fetch.queue.backoff.ms`) before fetching again: a reader of a
        // shared topic held ~150 MiB, and a small queue made it crawl.
        // Small buffers refilled at once read as fast in a fraction of the
        // memory (BENCHMARKS.md); `--kafka-opt` still decides.
        for (key, value) in [
            ("queued.max.messages.kbytes", "2048"),
            ("fetch.max.bytes", "1048576"),
            ("fetch.queue.backoff.ms", "5"),
        ] {
            if !self.options.iter().any(|(k, _)| k == key) {
                config.set(key, value);
            }
        }
        config
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set("auto.offset.reset", "error")
            .set("isolation.level", "read_committed");
        config
    }

    /// The producer's settings: chainship's defaults, then the passthrough
    /// settings, then what exactly-once depends on; the transactional id
    /// (fencing `origin`'s other producers) only when asked.
    pub(super) fn producer_config(&self, transactional_for: Option<&str>) -> ClientConfig {
        // Whole batches are enqueued at once, so no linger is needed to fill
        // librdkafka's batches; the passthrough settings can still set one.
        let mut config = ClientConfig::new();
        config.set("linger.ms", "0");
        // An undelivered batch is resent after a read-back, so a bounded
        // wait only makes failures visible sooner.
        config.set("message.timeout.ms", "30000");
        // Records are JSON with two hex hashes each: lz4 cuts the bytes sent and
        // stored several-fold for little CPU, and every Kafka client reads it.
        config.set("compression.type", "lz4");
        for (k, v) in &self.options {
            config.set(k, v);
        }
        config
            .set("bootstrap.servers", &self.brokers)
            .set("enable.idempotence", "true")
            .set("acks", "all");
        if let Some(origin) = transactional_for {
            config.set("transactional.id", transactional_id(origin));
        }
        config
    }
}

/// The transactional id that fences other producers of `origin`: one per
/// origin, and never another origin's (`x/y` and `x_y` differ).
pub fn transactional_id(origin: &str) -> String {
    format!("chainship-{}", origin_segment(origin))
}

/// Sorts a Kafka error by kind, naming what to change.
pub(super) fn classify(what: &str, e: &KafkaError) -> SinkError {
    use RDKafkaErrorCode as C;
    // A client that cannot even be built was given settings librdkafka refuses.
    // Its own text quotes the value, which may be a secret (`sasl.pasword=…`): name the key only.
    if let KafkaError::ClientConfig(_, description, key, value) = e {
        // librdkafka's description may quote the value too.
        let description = if value.is_empty() {
            description.clone()
        } else {
            description.replace(value.as_str(), "***")
        };
        return SinkError::permanent(format!("Kafka sink: {what}: setting {key:?} refused: {description}"))
            .with_setting(Setting::KafkaClient);
    }
    let message = format!("Kafka sink: {what}: {e}");
    if matches!(e, KafkaError::ClientCreation(_)) {
        return SinkError::permanent(message).with_setting(Setting::KafkaClient);
    }
    match e.rdkafka_error_code() {
        Some(C::MessageSizeTooLarge) | Some(C::InvalidMessageSize) => SinkError::permanent(format!(
            "{message} (one record is larger than the producer's message.max.bytes or the topic's max.message.bytes allows: raise both)"
        ))
        .with_setting(Setting::KafkaClient),
        Some(C::TopicAuthorizationFailed)
        | Some(C::ClusterAuthorizationFailed)
        | Some(C::TransactionalIdAuthorizationFailed)
        | Some(C::SaslAuthenticationFailed) => {
            SinkError::permanent(format!("{message} (check the credentials and the ACLs)")).with_setting(Setting::KafkaClient)
        }
        Some(C::UnknownTopicOrPartition) | Some(C::UnknownTopic) => SinkError::permanent(format!(
            "{message} (create the topic, or enable auto-create on the broker)"
        )),
        Some(C::ProducerFenced) | Some(C::InvalidProducerEpoch) | Some(C::Fenced) => SinkError::permanent(format!(
            "{message}: another follower for this origin took over (its transactional id fenced this one)"
        )),
        Some(C::InvalidConfig) | Some(C::InvalidArgument) => SinkError::permanent(message).with_setting(Setting::KafkaClient),
        _ => SinkError::transient(message),
    }
}

/// Destroys a client on a thread of its own: librdkafka's destroy waits
/// about 100 ms for its threads, which a short read (a start-up read-back,
/// `verify-export` of a small topic) would otherwise wait for each time.
pub(super) fn drop_in_background<T: Send + 'static>(client: T) {
    std::thread::spawn(move || drop(client));
}

/// A client whose failures come back as errors from its calls: librdkafka's
/// own log and error callbacks would repeat a down broker in dozens of lines.
pub(super) struct QuietContext;

impl rdkafka::ClientContext for QuietContext {
    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, _fac: &str, _log_message: &str) {}
    fn error(&self, _error: KafkaError, _reason: &str) {}
}

impl rdkafka::consumer::ConsumerContext for QuietContext {}

impl rdkafka::producer::ProducerContext for QuietContext {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::message::DeliveryResult<'_>, _: Self::DeliveryOpaque) {}
}

const HINT: &str = "expected KEY=VALUE, e.g. security.protocol=ssl (the value is not shown)";

/// A librdkafka setting name (`sasl.password`, `linger.ms`).
fn is_setting_name(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// A `--kafka-opt KEY=VALUE`: a librdkafka setting passed through, refused
/// (never echoing the value, which may be a password) when it is not
/// `KEY=VALUE` or sets what exactly-once delivery depends on.
pub fn parse_option(text: &str) -> Result<(String, String), Error> {
    let Some((key, value)) = text.split_once('=') else {
        // `sasl.password:hunter2`: name the setting (text before a separator,
        // when it looks like one: dotted, lower case), never what follows.
        let key = text
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c)))
            .map(|end| &text[..end])
            .filter(|k| is_setting_name(k) && k.contains('.'));
        return Err(permanent!(
            "{}",
            match key {
                Some(key) => format!("--kafka-opt {key}: {HINT}"),
                None => format!("--kafka-opt: {HINT}"),
            }
        ));
    };
    let key = key.trim();
    if !is_setting_name(key) {
        return Err(permanent!("--kafka-opt: KEY is not a librdkafka setting name; {HINT}"));
    }
    const OWNED: [&str; 4] = ["enable.idempotence", "acks", "transactional.id", "bootstrap.servers"];
    if OWNED.contains(&key) {
        return Err(permanent!(
            "--kafka-opt {key}: chainship sets this itself (exactly-once delivery depends on it)"
        ));
    }
    Ok((key.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::producer::FutureProducer;

    #[test]
    fn parses_urls() {
        let c = KafkaConfig::from_url("kafka://a:9092,b:9092/audit.events").unwrap();
        assert_eq!(
            (c.brokers.as_str(), c.topic.as_str()),
            ("a:9092,b:9092", "audit.events")
        );
        assert!(c.fence);
        assert_eq!(c.url(), "kafka://a:9092,b:9092/audit.events");
        assert!(KafkaConfig::from_url("kafka://a:9092").is_err());
        assert!(KafkaConfig::from_url("kafka://a:9092/bad topic").is_err());
        assert!(KafkaConfig::from_url("kafka:///t").is_err());
    }

    #[test]
    fn readers_prefetch_little_and_refill_at_once_unless_told_otherwise() {
        let mut c = KafkaConfig::from_url("kafka://a:1/t").unwrap();
        let config = c.reader_config("g");
        assert_eq!(config.get("queued.max.messages.kbytes"), Some("2048"));
        assert_eq!(config.get("fetch.queue.backoff.ms"), Some("5"));
        c.options = vec![("queued.max.messages.kbytes".into(), "65536".into())];
        assert_eq!(c.reader_config("g").get("queued.max.messages.kbytes"), Some("65536"));
    }

    #[test]
    fn consumers_never_get_producer_settings() {
        let mut c = KafkaConfig::from_url("kafka://a:1/t").unwrap();
        c.options = vec![
            ("linger.ms".into(), "5".into()),
            ("security.protocol".into(), "ssl".into()),
        ];
        let config = c.reader_config("g");
        assert_eq!(config.get("linger.ms"), None);
        assert_eq!(config.get("security.protocol"), Some("ssl"));
        assert_eq!(config.get("isolation.level"), Some("read_committed"));
        let producer = c.producer_config(Some("team/a"));
        assert_eq!(producer.get("linger.ms"), Some("5"));
        assert_eq!(producer.get("transactional.id"), Some("chainship-team%2Fa"));
        assert_eq!(c.producer_config(None).get("transactional.id"), None);
    }

    #[test]
    fn tls_sasl_and_every_compression_are_built_in() {
        // The settings operators pass through must be accepted by this
        // build of librdkafka (creating a producer does not connect anywhere).
        let cases: [&[(&str, &str)]; 6] = [
            &[("security.protocol", "ssl")],
            &[
                ("security.protocol", "sasl_ssl"),
                ("sasl.mechanisms", "SCRAM-SHA-512"),
                ("sasl.username", "u"),
                ("sasl.password", "p"),
            ],
            &[
                ("security.protocol", "sasl_ssl"),
                ("sasl.mechanisms", "PLAIN"),
                ("sasl.username", "u"),
                ("sasl.password", "p"),
            ],
            &[("compression.type", "zstd")],
            &[("compression.type", "gzip")],
            &[("compression.type", "snappy")],
        ];
        for settings in cases {
            let mut config = ClientConfig::new();
            config.set("bootstrap.servers", "127.0.0.1:1");
            for (key, value) in settings {
                config.set(*key, *value);
            }
            let created = config.create::<FutureProducer>();
            assert!(created.is_ok(), "{settings:?}: {:?}", created.err());
        }
    }

    #[test]
    fn settings_librdkafka_refuses_are_permanent_errors() {
        let err = ClientConfig::new()
            .set("compression.type", "brotli")
            .create::<FutureProducer>()
            .err()
            .expect("refused");
        let e = classify("creating the producer", &err);
        assert_eq!(e.kind, crate::ErrorKind::Permanent);
        assert_eq!(e.setting, Some(Setting::KafkaClient), "{e}");
    }

    #[test]
    fn kafka_opt_errors_never_show_the_value() {
        assert_eq!(
            parse_option("sasl.password=a=b").unwrap(),
            ("sasl.password".into(), "a=b".into())
        );
        for bad in [
            "sasl.password:hunter2",
            "sasl.password hunter2",
            "hunter2",
            "Hunter.2:x",
            "x y=hunter2",
        ] {
            let err = parse_option(bad).unwrap_err().message;
            assert!(!err.contains("hunter2") && !err.contains("Hunter"), "{bad:?}: {err}");
        }
        assert!(
            parse_option("sasl.password:hunter2")
                .unwrap_err()
                .message
                .starts_with("--kafka-opt sasl.password: ")
        );
        assert!(parse_option("acks=0").unwrap_err().message.contains("sets this itself"));
    }
}
