# chainship: multi-stage build, runs as a non-root user.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin chainship

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/chainship --create-home chainship
COPY --from=build /src/target/release/chainship /usr/local/bin/chainship
USER chainship
WORKDIR /var/lib/chainship
ENTRYPOINT ["chainship"]
CMD ["--help"]
