import { paintMarker, type Terminal } from './terminal.js';

/** Progress of long work (`goal`, `run`, `eval`) on stderr. */
export interface ProgressDisplay {
  /**
   * One step of a task or node. With a `key` and `done: false` the line is live: on a terminal it stays at
   * the bottom and is rewritten by the next update of the same key; `done: true` settles it with its final
   * text. Without a key the line is printed once.
   */
  update(text: string, options?: { key?: string; done?: boolean }): void;
}

const cursorUp = (lines: number) => (lines > 0 ? `\u001b[${lines}A` : '');
const eraseDown = '\u001b[J';

/**
 * On a terminal (`terminal.live`) the lines of running tasks form a block at the bottom that is redrawn in
 * place (cursor up, erase, draw), with settled lines printed above it; anywhere else each update is one
 * line, as a log would have it.
 */
export function createProgressDisplay(write: (text: string) => void, terminal: Terminal): ProgressDisplay {
  const paint = (text: string) => paintMarker(terminal.progressColor, text);
  if (!terminal.live) return { update: (text) => write(`${paint(text)}\n`) };

  const open = new Map<string, string>();
  let drawn = 0;
  return {
    update(text, { key, done = false } = {}) {
      let settled = '';
      if (key === undefined || done) {
        if (key !== undefined) open.delete(key);
        settled = `${paint(text)}\n`;
      } else open.set(key, text);
      const block = [...open.values()].map((line) => `${paint(line)}\n`).join('');
      write(`\r${cursorUp(drawn)}${eraseDown}${settled}${block}`);
      drawn = open.size;
    },
  };
}

/** What `goal` shows of an `agent:progress` event: each delegated task's line lives until its worker ends. */
export function showAgentProgress(
  display: ProgressDisplay,
  data: { phase: string; message: string; workItemId?: string },
): void {
  const key = data.workItemId;
  switch (data.phase) {
    case 'delegated':
      display.update(`· ${data.message}`, key ? { key } : {});
      return;
    case 'worker-started':
      display.update(`▸ ${data.message}`, key ? { key } : {});
      return;
    case 'worker-completed':
      display.update(`✓ ${data.message}`, key ? { key, done: true } : {});
      return;
    case 'worker-failed':
    case 'worker-cancelled':
      display.update(`✗ ${data.message}`, key ? { key, done: true } : {});
      return;
    default:
      display.update(`· ${data.message}`);
  }
}
