import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

const driverPath = createRequire(import.meta.url).resolve('better-sqlite3');

/**
 * The worker: a read-only connection of its own, one step of terms at a time, the next when the thread that
 * started it asks (so that a vocabulary it stops reading is not read to its end meanwhile).
 */
const readerSource = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driverPath);
const db = new Database(workerData.file, { readonly: true, fileMustExist: true });
db.exec("CREATE VIRTUAL TABLE temp.memory_fts_terms USING fts5vocab (main, 'memory_fts', 'row')");
const step = db.prepare('SELECT term, doc FROM temp.memory_fts_terms WHERE term > ? ORDER BY term LIMIT ?').raw();
let after = '';
const next = () => {
  const terms = step.all(after, workerData.stepTerms);
  const last = terms.length < workerData.stepTerms;
  if (last) db.close();
  else after = terms[terms.length - 1][0];
  parentPort.postMessage({ terms, last });
};
parentPort.on('message', next);
next();
`;

/**
 * Reads the terms of the full-text index `memory_fts` in the SQLite database file `file`, with the rows
 * holding each (FTS5's `fts5vocab`), in a worker thread: `stepTerms` terms at a time, in term order, each
 * step handed to `onTerms`, which returns false to stop there. Resolves true once every term was handed
 * over, false when stopped or aborted by `signal`; rejects when the file cannot be read. Settles only once the
 * thread has exited, its connection closed with it: after that it makes no file again.
 */
export function readVocabulary(
  file: string,
  onTerms: (terms: ReadonlyArray<[term: string, rows: number]>) => boolean,
  options: { stepTerms?: number; signal?: AbortSignal } = {},
): Promise<boolean> {
  const { stepTerms = 2_048, signal } = options;
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve, reject) => {
    // No inherited environment: the provider keys live there.
    const worker = new Worker(readerSource, {
      eval: true,
      env: {},
      workerData: { file, driverPath, stepTerms },
    });
    worker.unref();
    let settled = false;
    const finish = (outcome: boolean | Error) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', abort);
      // Terminating closes the thread's connection (the driver's cleanup when the thread ends).
      void worker.terminate().finally(() => {
        if (outcome instanceof Error) reject(outcome);
        else resolve(outcome);
      });
    };
    const abort = () => finish(false);
    signal?.addEventListener('abort', abort, { once: true });
    worker.on('message', ({ terms, last }: { terms: Array<[string, number]>; last: boolean }) => {
      if (settled) return;
      if (!onTerms(terms)) finish(false);
      else if (last) finish(true);
      else worker.postMessage('next');
    });
    worker.on('error', (error) => finish(error));
    worker.on('exit', (code) => finish(new Error(`the vocabulary reader exited with code ${code}`)));
  });
}
