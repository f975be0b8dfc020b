/*
 * packing.h - a transaction's pack of one queue's changes (packing.c), as the
 * capture trigger (pgshovel_capture.c) fills it.
 */
#ifndef PGSHOVEL_PACKING_H
#define PGSHOVEL_PACKING_H

#include "queue.h"

typedef struct Pack Pack;

extern bool pack_copy_lines(const char *argument);
extern Pack *pack_for(QueueEntry *entry, const char *argument, bool direct);
extern int	pack_table(Pack *pack, const char *schema, const char *name, const char *version,
					   const char *keys, const char *columns);
extern void pack_add(Pack *pack, int table, const char *type, const char *data, int length,
					 bool check_sequence);
extern void pack_end_call(Pack *pack);

#endif							/* PGSHOVEL_PACKING_H */
