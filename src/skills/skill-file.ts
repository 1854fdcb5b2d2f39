import { readRegularFile } from '../util/index.js';

/** A SKILL.md past this size is not read: an agent can write skills, and a real one is a few KiB. */
export const maxSkillFileBytes = 256 * 1024;

/**
 * A SKILL.md's text, or why it was not read: not a regular file (a FIFO would block the read forever, a
 * device never end), or larger than `maxSkillFileBytes` (never read past one byte over it, however the file
 * grows meanwhile). A missing file rejects with ENOENT, as `readFile` does.
 */
export async function readSkillFile(file: string): Promise<{ text: string } | { problem: string }> {
  const read = await readRegularFile(file, maxSkillFileBytes);
  if ('bytes' in read) return { text: read.bytes.toString('utf8') };
  return {
    problem:
      read.refused === 'too large' ? `larger than the limit of ${maxSkillFileBytes} bytes` : read.refused,
  };
}
