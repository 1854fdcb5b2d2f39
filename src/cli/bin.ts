import { disableAllocationSitePretenuring } from '../util/index.js';
import { main } from './main.js';

disableAllocationSitePretenuring();

// A reader that goes away early (`agentd work list | head -1`) has what it wanted: stop quietly instead of
// dying on the unhandled stream error with a stack trace.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
});

main(process.argv).then(
  (exitCode) => {
    process.exitCode = exitCode;
  },
  (error: unknown) => {
    process.stderr.write(`agentd: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
