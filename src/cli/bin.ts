import { main } from './main.js';

main(process.argv).then(
  (exitCode) => {
    process.exitCode = exitCode;
  },
  (error: unknown) => {
    process.stderr.write(`agentd: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
