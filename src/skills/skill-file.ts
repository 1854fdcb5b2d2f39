import { constants } from 'node:fs';
import { open } from 'node:fs/promises';

/** A SKILL.md past this size is not read: an agent can write skills, and a real one is a few KiB. */
export const maxSkillFileBytes = 256 * 1024;

/** Bytes read at a time once a file turns out larger than it was when opened. */
const growthChunkBytes = 16 * 1024;

/**
 * A SKILL.md's text, or why it was not read: not a regular file (a FIFO would block the read forever, a
 * device never end), or larger than `maxSkillFileBytes` (never read past one byte over it, however the file
 * grows meanwhile). A missing file rejects with ENOENT, as `readFile` does.
 */
export async function readSkillFile(file: string): Promise<{ text: string } | { problem: string }> {
  // Non-blocking: opening a FIFO for reading waits for a writer otherwise.
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const info = await handle.stat();
    if (!info.isFile()) return { problem: 'not a regular file' };
    const tooLarge = { problem: `larger than the limit of ${maxSkillFileBytes} bytes` };
    if (info.size > maxSkillFileBytes) return tooLarge;
    const chunks: Buffer[] = [];
    let total = 0;
    let wanted = info.size + 1;
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.min(wanted, maxSkillFileBytes + 1 - total));
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, total);
      if (bytesRead === 0) break;
      chunks.push(chunk.subarray(0, bytesRead));
      total += bytesRead;
      if (total > maxSkillFileBytes) return tooLarge;
      wanted = growthChunkBytes;
    }
    return { text: Buffer.concat(chunks, total).toString('utf8') };
  } finally {
    await handle.close();
  }
}
