// Which environment variables configure agentd itself rather than the test suite (test/helpers/hermetic-env.ts
// drops them before every test file). No side effects: a test may import it without cleaning its environment.
const suiteKnobs = new Set([
  'AGENTD_TEST_PG_URL',
  'AGENTD_CHROMIUM',
  'AGENTD_OPENCLAW_DIR',
  'AGENTD_CRASH_SEED',
]);

/** True for a variable that configures agentd (or its providers and telemetry) rather than the suite. */
export const configuresAgentd = (name: string): boolean =>
  (name.startsWith('AGENTD_') && !suiteKnobs.has(name)) ||
  name.startsWith('OTEL_') ||
  name === 'DATABASE_URL' ||
  name === 'OPENAI_API_KEY' ||
  name === 'OPENAI_BASE_URL' ||
  name === 'ANTHROPIC_API_KEY';
