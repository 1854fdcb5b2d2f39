/**
 * The process's most recent log lines, kept in memory for `logs.tail`: at most `maxLines` lines and
 * `maxBytes` bytes, oldest dropped first. Positions are byte offsets into everything ever written (like a
 * file that rotates away its head), so a client can ask "what came after offset N" and learn when lines it
 * never saw were dropped.
 */
export interface LogRing {
  /** Takes one or more newline-terminated lines, as the logger writes them. */
  write(chunk: string | Uint8Array): boolean;
  /**
   * Lines after `cursor` (or the last `limit` lines without one), at most `limit` lines and `maxBytes` bytes,
   * newest kept when cut (following a cursor: oldest unseen first).
   */
  tail(options: { cursor?: number; limit: number; maxBytes: number }): LogTail;
}

export interface LogTail {
  /** Offset after the last line returned: pass it back as `cursor` to follow. */
  cursor: number;
  /** Bytes ever written. */
  size: number;
  lines: string[];
  /** Lines were left out to keep within `limit` or `maxBytes`. */
  truncated: boolean;
  /** The cursor was older than the oldest kept line (or past the end); the answer is the latest lines. */
  reset: boolean;
}

interface Entry {
  line: string;
  bytes: number;
  /** Offset of the byte after this line's newline. */
  end: number;
}

export function createLogRing(options: { maxLines?: number; maxBytes?: number } = {}): LogRing {
  const maxLines = options.maxLines ?? 2_000;
  const maxBytes = options.maxBytes ?? 1024 * 1024;
  const entries: Entry[] = [];
  let keptBytes = 0;
  let size = 0;
  let partial = '';

  const push = (line: string) => {
    const bytes = Buffer.byteLength(line, 'utf8') + 1;
    size += bytes;
    entries.push({ line, bytes, end: size });
    keptBytes += bytes;
    while (entries.length > maxLines || (keptBytes > maxBytes && entries.length > 1)) {
      keptBytes -= (entries.shift() as Entry).bytes;
    }
  };

  return {
    write(chunk) {
      const text = partial + (typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      const lines = text.split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) if (line.length > 0) push(line);
      return true;
    },
    tail({ cursor, limit, maxBytes: answerBytes }) {
      const oldestStart = entries.length > 0 ? (entries[0] as Entry).end - (entries[0] as Entry).bytes : size;
      const reset = cursor !== undefined && (cursor < oldestStart || cursor > size);
      const following = cursor !== undefined && !reset;
      let from = following ? entries.findIndex((entry) => entry.end > cursor) : 0;
      if (from < 0) from = entries.length;
      let selected = entries.slice(from);
      let truncated = false;
      if (selected.length > limit) {
        // Following a cursor, the oldest unseen lines come first (the rest on the next call); otherwise the newest.
        selected = following ? selected.slice(0, limit) : selected.slice(-limit);
        truncated = true;
      }
      let bytes = 0;
      const within: Entry[] = [];
      const ordered = following ? selected : [...selected].reverse();
      for (const entry of ordered) {
        if (bytes + entry.bytes > answerBytes && within.length > 0) {
          truncated = true;
          break;
        }
        bytes += entry.bytes;
        within.push(entry);
      }
      if (!following) within.reverse();
      const last = within.at(-1);
      return {
        cursor: last ? last.end : following ? cursor : size,
        size,
        lines: within.map((entry) => entry.line),
        truncated,
        reset,
      };
    },
  };
}
