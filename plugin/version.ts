/** The package's version, for the start-up log line (a test keeps it equal to package.json's). */
export const VERSION = "0.3.19";
