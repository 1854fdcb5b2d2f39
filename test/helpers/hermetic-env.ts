// Loaded before every test file (vitest `setupFiles`). The suite starts agentd's runtime and CLI with the
// environment it sets itself, but many of its children inherit `process.env` and many configs are loaded from
// it: a shell that followed the README's tour exports AGENTD_TOKEN and a URL, and a developer's may carry a
// provider key, DATABASE_URL or an OpenTelemetry endpoint. Those would change what the tests run (a token in
// the environment, for one, means no token file is written), so they are dropped here. The suite's own knobs
// stay (test/helpers/agentd-env.ts says which variables are which).
import { configuresAgentd } from './agentd-env.js';

for (const name of Object.keys(process.env)) if (configuresAgentd(name)) delete process.env[name];
