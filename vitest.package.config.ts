import { defineConfig } from 'vitest/config';

/** `npm run test:package`: the tarball as users install it (see test/package/). */
export default defineConfig({
  test: {
    include: ['test/package/**/*.test.ts'],
    // agentd's own variables in the developer's shell (the README's tour exports AGENTD_TOKEN) stay out.
    setupFiles: ['test/helpers/hermetic-env.ts'],
    // One temporary directory a run, removed at its end (see the module).
    globalSetup: ['test/helpers/temporary-root.ts'],
    testTimeout: 120_000,
    hookTimeout: 240_000,
    pool: 'forks',
  },
});
