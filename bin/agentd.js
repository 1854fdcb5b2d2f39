#!/usr/bin/env node
// The published entry point runs the compiled CLI; `npm ci` builds dist/ through the prepare script.
import { main } from '../dist/cli/main.js';

main(process.argv).then(
  (exitCode) => {
    process.exitCode = exitCode;
  },
  (error) => {
    process.stderr.write(`agentd: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
