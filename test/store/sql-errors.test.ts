import { describe, expect, it } from 'vitest';
import { mightSucceedLater } from '../../src/store/index.js';
import { ErrorCodes, SystemError, UserInputError } from '../../src/util/index.js';

/** An error as a driver or Node throws it: a message and a `code`. */
const coded = (code: string, message = `failed with ${code}`) => Object.assign(new Error(message), { code });

describe('mightSucceedLater', () => {
  it.each([
    ['STORE_UNAVAILABLE', new SystemError({ code: ErrorCodes.storeUnavailable, message: 'disk full' })],
    [
      'a retryable agentd error',
      new SystemError({ code: ErrorCodes.internal, message: 'try again', retryable: true }),
    ],
    ['SQLITE_FULL', coded('SQLITE_FULL')],
    ['SQLITE_IOERR_WRITE', coded('SQLITE_IOERR_WRITE')],
    ['SQLITE_BUSY_SNAPSHOT', coded('SQLITE_BUSY_SNAPSHOT')],
    ['SQLITE_READONLY', coded('SQLITE_READONLY')],
    ['Postgres 08006 connection failure', coded('08006')],
    ['Postgres 08P01 protocol violation', coded('08P01')],
    ['Postgres 40001 serialization failure', coded('40001')],
    ['Postgres 40P01 deadlock', coded('40P01')],
    ['Postgres 53100 disk full', coded('53100')],
    ['Postgres 53200 out of memory', coded('53200')],
    ['Postgres 53300 too many connections', coded('53300')],
    ['Postgres 57P01 admin shutdown', coded('57P01')],
    ['Postgres 57P03 cannot connect now', coded('57P03')],
    ['Postgres 58030 I/O error', coded('58030')],
    ['Postgres 55P03 lock not available', coded('55P03')],
    ['ENOSPC', coded('ENOSPC')],
    ['EIO', coded('EIO')],
    ['ECONNRESET', coded('ECONNRESET')],
    ['ECONNREFUSED', coded('ECONNREFUSED')],
    ['ETIMEDOUT', coded('ETIMEDOUT')],
    ['EPIPE', coded('EPIPE')],
  ])('%s: may succeed later', (_, error) => {
    expect(mightSucceedLater(error)).toBe(true);
  });

  it.each([
    ['a TypeError', new TypeError("Cannot read properties of undefined (reading 'id')")],
    ['a plain Error', new Error('disk I/O error')],
    ['a thrown string', 'boom'],
    ['undefined', undefined],
    ['an internal agentd error', new SystemError({ code: ErrorCodes.internal, message: 'bug' })],
    ['a conflict', new UserInputError({ code: ErrorCodes.conflict, message: 'ids taken' })],
    [
      'an agentd error whose code looks like a SQLSTATE',
      new SystemError({ code: '40001', message: 'not a driver error' }),
    ],
    ['SQLITE_CONSTRAINT_NOTNULL', coded('SQLITE_CONSTRAINT_NOTNULL')],
    ['SQLITE_CONSTRAINT_UNIQUE', coded('SQLITE_CONSTRAINT_UNIQUE')],
    ['SQLITE_ERROR', coded('SQLITE_ERROR', 'no such table: nowhere')],
    ['SQLITE_MISMATCH', coded('SQLITE_MISMATCH')],
    ['SQLITE_CORRUPT', coded('SQLITE_CORRUPT')],
    ['Postgres 23505 unique violation', coded('23505')],
    ['Postgres 23502 not-null violation', coded('23502')],
    ['Postgres 42P01 undefined table', coded('42P01')],
    ['Postgres 42601 syntax error', coded('42601')],
    ['Postgres 22P02 invalid text representation', coded('22P02')],
    ['Postgres 55000 object not in prerequisite state', coded('55000')],
    ['a Node code of a bug', coded('ERR_INVALID_ARG_TYPE')],
  ])('%s: a defect', (_, error) => {
    expect(mightSucceedLater(error)).toBe(false);
  });
});
