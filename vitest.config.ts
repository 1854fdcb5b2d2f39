import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The packed-package test builds and installs the tarball: `npm run test:package` (CI runs both).
    exclude: ['test/package/**', '**/node_modules/**'],
    // agentd's own variables in the developer's shell (the README's tour exports AGENTD_TOKEN) stay out.
    setupFiles: ['test/helpers/hermetic-env.ts'],
    // One temporary directory a run, removed at its end (see the module).
    globalSetup: ['test/helpers/temporary-root.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores on CI machines: more workers only add contention.
    maxWorkers: 2,
  },
});
