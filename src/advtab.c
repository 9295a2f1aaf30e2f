// SPDX-License-Identifier: MIT
/*
 * The advices the library knows (advtab.h): the table and its inverse, both
 * made from the one list MADVX_ADVICES, so they cannot disagree.
 */
#include "advtab.h"

const struct advice_desc __madvx_advices[] = {
#define ADVICE_ROW(adv, lock, remote) { adv, #adv, lock, remote },
	MADVX_ADVICES(ADVICE_ROW)
#undef ADVICE_ROW
};
const size_t __madvx_nadvices = ARRAY_SIZE(__madvx_advices);

/* Each advice's position in the list, by name. */
enum {
#define ADVICE_POS(adv, lock, remote) POS_##adv,
	MADVX_ADVICES(ADVICE_POS)
#undef ADVICE_POS
	POS__COUNT
};
_Static_assert(POS__COUNT <= 64, "advice mask is 64 bits");
_Static_assert(POS__COUNT < 128, "advice_index_of[] holds int8_t");

/*
 * advice value -> 1 + position (0: unknown). A value above MADVX_ADVICE_MAX
 * does not compile (excess initializer index), and -Woverride-init (in
 * -Wextra) catches one value listed twice.
 */
const int8_t __madvx_advice_index_of[MADVX_ADVICE_MAX + 1] = {
#define ADVICE_INDEX(adv, lock, remote) [adv] = POS_##adv + 1,
	MADVX_ADVICES(ADVICE_INDEX)
#undef ADVICE_INDEX
};

_Static_assert(MADVX_ADVICE_MAX == MADV_GUARD_REMOVE, "advice table bound");

MADVX_HOT int __madvx_advice_at(int index)
{
	return index >= 0 && index < (int)__madvx_nadvices ? __madvx_advices[index].advice : -1;
}
