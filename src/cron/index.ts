export {
  type CronActions,
  type CronRunResult,
  type CronScheduler,
  createCronScheduler,
} from './scheduler.js';
export {
  type CronJob,
  type CronJobInput,
  type CronPayload,
  type CronRunStatus,
  type CronSchedule,
  cronPayloadSchema,
  cronScheduleSchema,
  invalidScheduleCode,
  nextRunAfter,
} from './types.js';
