// Loaded before every test file (vitest `setupFiles`). The suite starts agentd's runtime and CLI with the
// environment it sets itself, but many of its children inherit `process.env` and many configs are loaded from
// it: a shell that followed the README's tour exports AGENTD_TOKEN and a URL, and a developer's may carry a
// provider key, DATABASE_URL or an OpenTelemetry endpoint. Those would change what the tests run (a token in
// the environment, for one, means no token file is written), so they are dropped here. The suite's own knobs
// (AGENTD_TEST_PG_URL, AGENTD_CHROMIUM, AGENTD_OPENCLAW_DIR, AGENTD_CRASH_SEED) stay.
const suiteKnobs = new Set([
  'AGENTD_TEST_PG_URL',
  'AGENTD_CHROMIUM',
  'AGENTD_OPENCLAW_DIR',
  'AGENTD_CRASH_SEED',
]);
const configuresAgentd = (name: string) =>
  (name.startsWith('AGENTD_') && !suiteKnobs.has(name)) ||
  name.startsWith('OTEL_') ||
  name === 'DATABASE_URL' ||
  name === 'OPENAI_API_KEY' ||
  name === 'OPENAI_BASE_URL' ||
  name === 'ANTHROPIC_API_KEY';

for (const name of Object.keys(process.env)) if (configuresAgentd(name)) delete process.env[name];
