# agentd: build the package, install it as users do (npm install of the packed tarball), run it as a
# non-root user. `docker build -t agentd .` then see compose.yaml or docs/deployment.md.

# --- build: compile TypeScript, pack, install the tarball with production dependencies only ---------
FROM node:20-bookworm-slim AS build
# better-sqlite3 compiles from source when no prebuilt binary matches.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY src ./src
COPY migrations ./migrations
COPY defaults ./defaults
COPY dashboard ./dashboard
COPY native ./native
COPY scripts/build-sqlite.mjs ./scripts/build-sqlite.mjs
# The installed better-sqlite3 is then rebuilt with agentd's WAL batching (docs/storage.md, "One write a
# commit"), as `npm ci` does in the repository.
RUN npm run build \
  && npm pack --ignore-scripts --pack-destination /tmp \
  && mkdir -p /opt/agentd \
  && cd /opt/agentd \
  && npm init -y >/dev/null \
  && npm install /tmp/agentd-*.tgz --omit=dev --no-audit --no-fund \
  && node node_modules/agentd/scripts/build-sqlite.mjs

# --- runtime: Node and the installed package, nothing else ------------------------------------------
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    AGENTD_HOME=/var/lib/agentd \
    AGENTD_HOST=0.0.0.0 \
    AGENTD_PORT=7777
COPY --from=build /opt/agentd /opt/agentd
RUN ln -s /opt/agentd/node_modules/agentd/bin/agentd.js /usr/local/bin/agentd \
  && mkdir -p /var/lib/agentd \
  && chown node:node /var/lib/agentd
# The image's unprivileged `node` user (uid 1000) owns only the state directory.
USER node
WORKDIR /var/lib/agentd
VOLUME ["/var/lib/agentd"]
EXPOSE 7777
# /health answers {status, version} without the token; non-2xx (or no answer) marks the container unhealthy.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:7777/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["agentd"]
CMD ["serve"]
