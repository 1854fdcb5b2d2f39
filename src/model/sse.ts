/** A line of the event stream ran past the limit without ending. */
export class EventLineTooLongError extends Error {
  constructor(maxLineChars: number) {
    super(`a line of the event stream is longer than ${maxLineChars} characters`);
    this.name = 'EventLineTooLongError';
  }
}

/** One server-sent event: its `event` field (null when it had none) and its data lines joined by `\n`. */
export interface ServerSentEvent {
  event: string | null;
  data: string;
}

/**
 * The events of a `text/event-stream` body, read as the providers' SDKs read one: lines end at `\n`, `\r\n`
 * or `\r`; a blank line dispatches the event when it had an `event` or `data` field; a line starting with
 * `:` is a comment; one space after a field's colon is dropped; other fields are ignored; an event the body
 * ends without a blank line after is not dispatched. `body` yields bytes (a Node stream or a web
 * `ReadableStream`); a character split between two chunks is decoded whole. A line longer than
 * `maxLineChars` (a server that never ends one would fill the memory) throws.
 */
export async function* serverSentEvents(
  body: AsyncIterable<Uint8Array | string>,
  maxLineChars: number,
): AsyncGenerator<ServerSentEvent, void, undefined> {
  const decoder = new TextDecoder();
  const reader = createEventReader(maxLineChars);
  for await (const chunk of body) {
    const events = reader.read(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }));
    for (const event of events) yield event;
  }
  for (const event of reader.read(decoder.decode(), true)) yield event;
}

/** Lines to events, text chunk by text chunk; `final` with the last (a `\r` ending it then ends a line). */
function createEventReader(maxLineChars: number): { read(text: string, final?: boolean): ServerSentEvent[] } {
  let buffered = '';
  let event: string | null = null;
  let data: string[] = [];
  return {
    read(text, final = false) {
      buffered += text;
      const events: ServerSentEvent[] = [];
      let start = 0;
      for (;;) {
        const end = lineEnd(buffered, start, final);
        if (end === -1) break;
        const line = buffered.slice(start, end);
        start = end + (buffered.charCodeAt(end) === 13 && buffered.charCodeAt(end + 1) === 10 ? 2 : 1);
        if (line === '') {
          if (event !== null || data.length > 0) {
            events.push({ event, data: data.join('\n') });
            event = null;
            data = [];
          }
          continue;
        }
        if (line.charCodeAt(0) === 58) continue; // ':' starts a comment
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? '' : line.slice(colon + 1);
        if (value.charCodeAt(0) === 32) value = value.slice(1);
        if (field === 'data') data.push(value);
        else if (field === 'event') event = value;
      }
      buffered = start === 0 ? buffered : buffered.slice(start);
      if (buffered.length > maxLineChars) throw new EventLineTooLongError(maxLineChars);
      return events;
    },
  };
}

/**
 * Index of the next `\r` or `\n` at or after `from`, or -1. A `\r` ending the text may be the first half of
 * a `\r\n` split between chunks, so it counts only in the `final` text.
 */
function lineEnd(text: string, from: number, final: boolean): number {
  for (let index = from; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code === 10) return index;
    if (code === 13) return index === text.length - 1 && !final ? -1 : index;
  }
  return -1;
}
