/*
** agentd: one write a commit to SQLite's write-ahead log (docs/decisions/0051-one-wal-write-a-commit.md).
**
** SQLite writes each WAL frame as two writes, the 24-byte frame header and then the page, so a commit of
** seven pages is fourteen pwrite() calls: 27 us a commit in a C program on the VM this was measured on,
** against 6.5 us for the same bytes in one call. This file wraps the default VFS: writes to a WAL file that
** continue where the last one ended are gathered in memory, and handed to the real file in one write when
** the commit frame is complete (its header carries the database size, which only a commit frame's does).
** The commit's write returns that write's result, so a full disk fails the commit as it did before, and
** nothing is published in the WAL index before its frames are in the file. Any other call on the file (a
** read, a sync, a truncate, its size, a file control, a write elsewhere) first writes what is gathered, and
** a write back into frames written earlier goes to the file at once, so SQLite never sees the file without
** its own bytes.
**
** On Linux it also starts the write-out of the pages a checkpoint copies into a database file as it copies
** them (agentdStartWriteOut), so the sync that ends the checkpoint waits for less.
**
** It is appended to SQLite's amalgamation by scripts/build-sqlite.mjs and registered as the default VFS
** from SQLITE_EXTRA_INIT. AGENTD_SQLITE_WAL_BATCH=0 in the environment leaves the default VFS as it was;
** AGENTD_SQLITE_WRITE_OUT=0 keeps the batching and leaves the write-out to the sync. agentd_wal_batch() in
** SQL answers the process's counts as JSON: WAL writes SQLite made, writes handed to the real file, commits
** written in one, and write-outs started.
*/
#include <stdlib.h>
#include <string.h>

/* A frame header is 24 bytes; bytes 4..7 hold the database size in pages after a commit, 0 otherwise. */
#define AGENTD_WAL_FRAME_HEADER 24
/* The most one write hands the real file: 31 pages of 4 KiB with their headers, under the unix VFS's limit. */
#define AGENTD_WAL_WRITE_LIMIT (31 * (4096 + AGENTD_WAL_FRAME_HEADER))
/* Past this many gathered bytes (a bulk transaction spilling pages) they are written at once. */
#define AGENTD_WAL_BATCH_LIMIT (4 * 1024 * 1024)
/* A buffer grown past this for a big transaction is given back once written. */
#define AGENTD_WAL_BUFFER_KEPT (256 * 1024)
/* Bytes written to a database file after which their write-out is started (Linux: sync_file_range). */
#define AGENTD_WRITEBACK_BYTES (1024 * 1024)

typedef struct AgentdBatchFile AgentdBatchFile;
struct AgentdBatchFile {
  sqlite3_file base;
  sqlite3_file *pReal;    /* The default VFS's file, allocated right after this struct */
  int isWal;              /* Only WAL files are gathered */
  int commitPending;      /* A commit frame's header was written: write out after its page */
  unsigned char *aBuf;    /* Gathered bytes */
  int nBuf;
  int nAlloc;
  sqlite3_int64 iBufOfst; /* Where aBuf[0] goes in the file */
  sqlite3_int64 iLastEnd; /* Where the last write on this file ended; -1 before the first */
  int fd;                 /* A database file's descriptor, for early write-out; -1 for any other file */
  sqlite3_int64 iDirtyLo; /* The range written since the last sync or write-out started */
  sqlite3_int64 iDirtyHi;
  sqlite3_int64 nDirty;   /* Bytes written in that range */
};

static sqlite3_vfs *agentdRealVfs = 0;
static sqlite3_vfs agentdBatchVfs;

static sqlite3_int64 agentdWalWritesAsked = 0;
static sqlite3_int64 agentdWalWritesMade = 0;
static sqlite3_int64 agentdWalCommitsBatched = 0;
static sqlite3_int64 agentdWriteOutsStarted = 0;
/*
** Whether database files have their write-out started early: the real VFS is SQLite's own "unix" (this one
** reads its files' descriptors) and AGENTD_SQLITE_WRITE_OUT is not 0.
*/
static int agentdStartsWriteOuts = 0;

static void agentdCount(sqlite3_int64 *counter) {
#if defined(__GNUC__) || defined(__clang__)
  __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
#else
  (*counter)++;
#endif
}

static sqlite3_int64 agentdRead(sqlite3_int64 *counter) {
#if defined(__GNUC__) || defined(__clang__)
  return __atomic_load_n(counter, __ATOMIC_RELAXED);
#else
  return *counter;
#endif
}

/*
** Writes what is gathered. On failure the bytes are dropped: SQLite fails the transaction they belong to.
** The unix VFS writes at most 128 KiB - 1 bytes a call (a short write past that is SQLITE_FULL), hence the
** pieces.
*/
static int agentdFlush(AgentdBatchFile *p) {
  int rc = SQLITE_OK;
  int done = 0;
  while (done < p->nBuf && rc == SQLITE_OK) {
    int piece = p->nBuf - done < AGENTD_WAL_WRITE_LIMIT ? p->nBuf - done : AGENTD_WAL_WRITE_LIMIT;
    rc = p->pReal->pMethods->xWrite(p->pReal, p->aBuf + done, piece, p->iBufOfst + done);
    agentdCount(&agentdWalWritesMade);
    done += piece;
  }
  p->nBuf = 0;
  if (p->nAlloc > AGENTD_WAL_BUFFER_KEPT) {
    sqlite3_free(p->aBuf);
    p->aBuf = 0;
    p->nAlloc = 0;
  }
  return rc;
}

static int agentdGather(AgentdBatchFile *p, const void *z, int iAmt, sqlite3_int64 iOfst) {
  if (p->nBuf + iAmt > p->nAlloc) {
    int nNew = p->nAlloc ? p->nAlloc : 64 * 1024;
    unsigned char *aNew;
    while (nNew < p->nBuf + iAmt) nNew *= 2;
    aNew = (unsigned char *)sqlite3_realloc64(p->aBuf, nNew);
    if (aNew == 0) return SQLITE_NOMEM;
    p->aBuf = aNew;
    p->nAlloc = nNew;
  }
  if (p->nBuf == 0) p->iBufOfst = iOfst;
  memcpy(p->aBuf + p->nBuf, z, iAmt);
  p->nBuf += iAmt;
  return SQLITE_OK;
}

/*
** A checkpoint copies every page changed since the last one into the database file, then syncs it: the
** disk starts on those pages only at the sync, and the commit that checkpoints waits for all of them there.
** Starting their write-out as they are written (without waiting for it) lets the disk work while the
** checkpoint copies, so the sync finds most of them written. Nothing changes for durability: SQLite's own
** sync still comes, and still decides.
*/
static void agentdStartWriteOut(AgentdBatchFile *p, int iAmt, sqlite3_int64 iOfst) {
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
  if (p->nDirty == 0 || iOfst < p->iDirtyLo) p->iDirtyLo = iOfst;
  if (p->nDirty == 0 || iOfst + iAmt > p->iDirtyHi) p->iDirtyHi = iOfst + iAmt;
  p->nDirty += iAmt;
  if (p->nDirty < AGENTD_WRITEBACK_BYTES) return;
  /* Best effort: a failure here leaves the pages to the sync, as before. */
  (void)sync_file_range(p->fd, p->iDirtyLo, p->iDirtyHi - p->iDirtyLo, SYNC_FILE_RANGE_WRITE);
  agentdCount(&agentdWriteOutsStarted);
  p->nDirty = 0;
#else
  (void)p;
  (void)iAmt;
  (void)iOfst;
#endif
}

static int agentdWrite(sqlite3_file *pFile, const void *z, int iAmt, sqlite3_int64 iOfst) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  int rc;
  int follows;
  if (!p->isWal) {
    rc = p->pReal->pMethods->xWrite(p->pReal, z, iAmt, iOfst);
    if (rc == SQLITE_OK && p->fd >= 0) agentdStartWriteOut(p, iAmt, iOfst);
    return rc;
  }
  agentdCount(&agentdWalWritesAsked);
  if (p->nBuf > 0 && iOfst != p->iBufOfst + p->nBuf) {
    rc = agentdFlush(p);
    if (rc != SQLITE_OK) return rc;
  }
  /*
  ** Gathered: what continues the last write, and the WAL's header (offset 0, the log starting over). Not
  ** gathered: a write back into frames this transaction wrote already (a page written again, or the frame
  ** headers SQLite writes again with new checksums before it commits). Such a header may carry the commit
  ** mark with no page after it, and the commit is published right after: it must be in the file by then.
  */
  follows = p->nBuf > 0 || iOfst == 0 || iOfst == p->iLastEnd || p->iLastEnd < 0;
  p->iLastEnd = iOfst + iAmt;
  if (iAmt == AGENTD_WAL_FRAME_HEADER) {
    const unsigned char *a = (const unsigned char *)z;
    p->commitPending = (a[4] | a[5] | a[6] | a[7]) != 0;
  } else if (iOfst == 0) {
    p->commitPending = 0;
  }
  if (!follows || agentdGather(p, z, iAmt, iOfst) != SQLITE_OK) {
    rc = agentdFlush(p);
    if (rc != SQLITE_OK) return rc;
    agentdCount(&agentdWalWritesMade);
    return p->pReal->pMethods->xWrite(p->pReal, z, iAmt, iOfst);
  }
  if (p->commitPending && iAmt != AGENTD_WAL_FRAME_HEADER) {
    /* The commit frame's page (or the rest of it after a sync point): the commit is whole. */
    agentdCount(&agentdWalCommitsBatched);
    return agentdFlush(p);
  }
  if (p->nBuf >= AGENTD_WAL_BATCH_LIMIT) return agentdFlush(p);
  return SQLITE_OK;
}

static int agentdClose(sqlite3_file *pFile) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  int rc = agentdFlush(p);
  int closed = p->pReal->pMethods ? p->pReal->pMethods->xClose(p->pReal) : SQLITE_OK;
  sqlite3_free(p->aBuf);
  p->aBuf = 0;
  p->nAlloc = 0;
  return rc != SQLITE_OK ? rc : closed;
}

/* Every other call sees the file with SQLite's bytes in it. */
#define AGENTD_FLUSHED(p)                       \
  do {                                          \
    int flushRc = agentdFlush(p);               \
    if (flushRc != SQLITE_OK) return flushRc;   \
  } while (0)

static int agentdReadFile(sqlite3_file *pFile, void *z, int iAmt, sqlite3_int64 iOfst) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  AGENTD_FLUSHED(p);
  return p->pReal->pMethods->xRead(p->pReal, z, iAmt, iOfst);
}
static int agentdTruncate(sqlite3_file *pFile, sqlite3_int64 size) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  AGENTD_FLUSHED(p);
  return p->pReal->pMethods->xTruncate(p->pReal, size);
}
static int agentdSync(sqlite3_file *pFile, int flags) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  AGENTD_FLUSHED(p);
  p->nDirty = 0;
  return p->pReal->pMethods->xSync(p->pReal, flags);
}
static int agentdFileSize(sqlite3_file *pFile, sqlite3_int64 *pSize) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  AGENTD_FLUSHED(p);
  return p->pReal->pMethods->xFileSize(p->pReal, pSize);
}
static int agentdLock(sqlite3_file *pFile, int eLock) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  AGENTD_FLUSHED(p);
  return p->pReal->pMethods->xLock(p->pReal, eLock);
}
static int agentdUnlock(sqlite3_file *pFile, int eLock) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  AGENTD_FLUSHED(p);
  return p->pReal->pMethods->xUnlock(p->pReal, eLock);
}
static int agentdCheckReservedLock(sqlite3_file *pFile, int *pResOut) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  return p->pReal->pMethods->xCheckReservedLock(p->pReal, pResOut);
}
static int agentdFileControl(sqlite3_file *pFile, int op, void *pArg) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  int rc = agentdFlush(p);
  if (rc != SQLITE_OK) return rc;
  rc = p->pReal->pMethods->xFileControl(p->pReal, op, pArg);
  if (op == SQLITE_FCNTL_VFSNAME && rc == SQLITE_OK) {
    *(char **)pArg = sqlite3_mprintf("agentd-wal-batch/%z", *(char **)pArg);
  }
  return rc;
}
static int agentdSectorSize(sqlite3_file *pFile) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  return p->pReal->pMethods->xSectorSize(p->pReal);
}
static int agentdDeviceCharacteristics(sqlite3_file *pFile) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  return p->pReal->pMethods->xDeviceCharacteristics(p->pReal);
}
static int agentdShmMap(sqlite3_file *pFile, int iPg, int pgsz, int bExtend, void volatile **pp) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  return p->pReal->pMethods->xShmMap(p->pReal, iPg, pgsz, bExtend, pp);
}
static int agentdShmLock(sqlite3_file *pFile, int offset, int n, int flags) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  return p->pReal->pMethods->xShmLock(p->pReal, offset, n, flags);
}
static void agentdShmBarrier(sqlite3_file *pFile) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  p->pReal->pMethods->xShmBarrier(p->pReal);
}
static int agentdShmUnmap(sqlite3_file *pFile, int deleteFlag) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  return p->pReal->pMethods->xShmUnmap(p->pReal, deleteFlag);
}
static int agentdFetch(sqlite3_file *pFile, sqlite3_int64 iOfst, int iAmt, void **pp) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  AGENTD_FLUSHED(p);
  if (p->pReal->pMethods->iVersion < 3) {
    *pp = 0;
    return SQLITE_OK;
  }
  return p->pReal->pMethods->xFetch(p->pReal, iOfst, iAmt, pp);
}
static int agentdUnfetch(sqlite3_file *pFile, sqlite3_int64 iOfst, void *pPage) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  if (p->pReal->pMethods->iVersion < 3) return SQLITE_OK;
  return p->pReal->pMethods->xUnfetch(p->pReal, iOfst, pPage);
}

static const sqlite3_io_methods agentdBatchMethods = {
  3,
  agentdClose,
  agentdReadFile,
  agentdWrite,
  agentdTruncate,
  agentdSync,
  agentdFileSize,
  agentdLock,
  agentdUnlock,
  agentdCheckReservedLock,
  agentdFileControl,
  agentdSectorSize,
  agentdDeviceCharacteristics,
  agentdShmMap,
  agentdShmLock,
  agentdShmBarrier,
  agentdShmUnmap,
  agentdFetch,
  agentdUnfetch,
};

/* For a real file without shared memory: the same methods, offered as version 1 (no WAL on such a file). */
static sqlite3_io_methods agentdBatchMethodsV1;

static int agentdOpen(sqlite3_vfs *pVfs, sqlite3_filename zName, sqlite3_file *pFile, int flags, int *pOutFlags) {
  AgentdBatchFile *p = (AgentdBatchFile *)pFile;
  int rc;
  (void)pVfs;
  memset(p, 0, sizeof(*p));
  p->pReal = (sqlite3_file *)&p[1];
  p->iLastEnd = -1;
  rc = agentdRealVfs->xOpen(agentdRealVfs, zName, p->pReal, flags, pOutFlags);
  if (p->pReal->pMethods == 0) {
    /* The real open failed before it made a file: SQLite will not call xClose on this one. */
    p->base.pMethods = 0;
    return rc;
  }
  p->isWal = (flags & SQLITE_OPEN_WAL) != 0;
  p->fd = -1;
#if SQLITE_OS_UNIX
  /* The shim is compiled into SQLite's amalgamation, after the unix VFS: its file struct is in view. */
  if (agentdStartsWriteOuts && (flags & SQLITE_OPEN_MAIN_DB) != 0) p->fd = ((unixFile *)p->pReal)->h;
#endif
  /* A real file without shared-memory methods must not be offered them (SQLite would use WAL with it). */
  p->base.pMethods = p->pReal->pMethods->iVersion >= 2 ? &agentdBatchMethods : &agentdBatchMethodsV1;
  return rc;
}

/* The rest of the VFS is the real one's. */
static int agentdDelete(sqlite3_vfs *v, const char *z, int syncDir) {
  (void)v;
  return agentdRealVfs->xDelete(agentdRealVfs, z, syncDir);
}
static int agentdAccess(sqlite3_vfs *v, const char *z, int flags, int *pResOut) {
  (void)v;
  return agentdRealVfs->xAccess(agentdRealVfs, z, flags, pResOut);
}
static int agentdFullPathname(sqlite3_vfs *v, const char *z, int nOut, char *zOut) {
  (void)v;
  return agentdRealVfs->xFullPathname(agentdRealVfs, z, nOut, zOut);
}
static void *agentdDlOpen(sqlite3_vfs *v, const char *z) {
  (void)v;
  return agentdRealVfs->xDlOpen(agentdRealVfs, z);
}
static void agentdDlError(sqlite3_vfs *v, int n, char *z) {
  (void)v;
  agentdRealVfs->xDlError(agentdRealVfs, n, z);
}
static void (*agentdDlSym(sqlite3_vfs *v, void *h, const char *z))(void) {
  (void)v;
  return agentdRealVfs->xDlSym(agentdRealVfs, h, z);
}
static void agentdDlClose(sqlite3_vfs *v, void *h) {
  (void)v;
  agentdRealVfs->xDlClose(agentdRealVfs, h);
}
static int agentdRandomness(sqlite3_vfs *v, int n, char *z) {
  (void)v;
  return agentdRealVfs->xRandomness(agentdRealVfs, n, z);
}
static int agentdSleep(sqlite3_vfs *v, int us) {
  (void)v;
  return agentdRealVfs->xSleep(agentdRealVfs, us);
}
static int agentdCurrentTime(sqlite3_vfs *v, double *pOut) {
  (void)v;
  return agentdRealVfs->xCurrentTime(agentdRealVfs, pOut);
}
static int agentdGetLastError(sqlite3_vfs *v, int n, char *z) {
  (void)v;
  return agentdRealVfs->xGetLastError(agentdRealVfs, n, z);
}
static int agentdCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *pOut) {
  (void)v;
  return agentdRealVfs->xCurrentTimeInt64(agentdRealVfs, pOut);
}

static void agentdWalBatchSql(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  sqlite3_result_text(
    ctx,
    sqlite3_mprintf(
      "{\"active\":%s,\"writesAsked\":%lld,\"writesMade\":%lld,\"commitsBatched\":%lld,\"writeOutsStarted\":%lld}",
      sqlite3_vfs_find(0) == &agentdBatchVfs ? "true" : "false",
      agentdRead(&agentdWalWritesAsked),
      agentdRead(&agentdWalWritesMade),
      agentdRead(&agentdWalCommitsBatched),
      agentdRead(&agentdWriteOutsStarted)
    ),
    -1,
    sqlite3_free
  );
}

static int agentdWalBatchFunction(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  (void)pzErrMsg;
  (void)pApi;
  return sqlite3_create_function(db, "agentd_wal_batch", 0, SQLITE_UTF8, 0, agentdWalBatchSql, 0, 0);
}

int agentd_wal_batch_init(const char *unused) {
  const char *setting = getenv("AGENTD_SQLITE_WAL_BATCH");
  const char *writeOutSetting;
  (void)unused;
  if (agentdRealVfs != 0) return SQLITE_OK;
  sqlite3_auto_extension((void (*)(void))agentdWalBatchFunction);
  if (setting != 0 && strcmp(setting, "0") == 0) return SQLITE_OK;
  agentdRealVfs = sqlite3_vfs_find(0);
  if (agentdRealVfs == 0) return SQLITE_OK;
  writeOutSetting = getenv("AGENTD_SQLITE_WRITE_OUT");
  agentdStartsWriteOuts = strcmp(agentdRealVfs->zName, "unix") == 0 &&
                          !(writeOutSetting != 0 && strcmp(writeOutSetting, "0") == 0);
  agentdBatchMethodsV1 = agentdBatchMethods;
  agentdBatchMethodsV1.iVersion = 1;
  agentdBatchVfs.iVersion = agentdRealVfs->iVersion < 3 ? agentdRealVfs->iVersion : 3;
  agentdBatchVfs.szOsFile = (int)sizeof(AgentdBatchFile) + agentdRealVfs->szOsFile;
  agentdBatchVfs.mxPathname = agentdRealVfs->mxPathname;
  agentdBatchVfs.zName = "agentd-wal-batch";
  agentdBatchVfs.xOpen = agentdOpen;
  agentdBatchVfs.xDelete = agentdDelete;
  agentdBatchVfs.xAccess = agentdAccess;
  agentdBatchVfs.xFullPathname = agentdFullPathname;
  agentdBatchVfs.xDlOpen = agentdDlOpen;
  agentdBatchVfs.xDlError = agentdDlError;
  agentdBatchVfs.xDlSym = agentdDlSym;
  agentdBatchVfs.xDlClose = agentdDlClose;
  agentdBatchVfs.xRandomness = agentdRandomness;
  agentdBatchVfs.xSleep = agentdSleep;
  agentdBatchVfs.xCurrentTime = agentdCurrentTime;
  agentdBatchVfs.xGetLastError = agentdGetLastError;
  agentdBatchVfs.xCurrentTimeInt64 = agentdCurrentTimeInt64;
  return sqlite3_vfs_register(&agentdBatchVfs, 1);
}
