# chainship: multi-stage build, runs as a non-root user.
# To package a binary built elsewhere (no Rust stage), put it at
# DIR/src/target/release/chainship and build with
# `--build-context build=DIR` (which replaces the build stage; podman 4.3+,
# BuildKit); `--build-arg BASE=...` picks the final stage's base image.
ARG BASE=debian:bookworm-slim

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin chainship && strip target/release/chainship

FROM ${BASE}
# Users and groups are numeric in docker-compose.yml and the Kubernetes
# manifest: chainship is 10001:10001; the demo runtime (the compose writer)
# is 10002, in chainship's group so the follower can read its database.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 chainship \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/chainship --create-home chainship \
 && useradd --system --uid 10002 --gid 10001 --no-create-home --home-dir /data agentrt-demo \
 # Volumes take their owner from these directories when first mounted:
 # the database (the runtime's, readable by chainship's group), the keys and
 # the follower's state (chainship's alone).
 && install -d -o 10002 -g 10001 -m 2750 /data \
 && install -d -o 10001 -g 10001 -m 0700 /keys /var/lib/chainship/state
COPY --from=build /src/target/release/chainship /usr/local/bin/chainship
USER chainship
WORKDIR /var/lib/chainship
ENTRYPOINT ["chainship"]
CMD ["--help"]
