// A stand-in libibverbs.so.1 for the refusal tests. Built with a version
// script that exports verbs_register_driver_NN@IBVERBS_PRIVATE_NN for the NN
// the test picks, plus a verbs_set_ops that copies FAKE_SLOTS members the
// way the real one does (into priv->ops, priv being the first word read).
#include <stdio.h>
#include <stdint.h>

#ifndef FAKE_PABI
#error FAKE_PABI required
#endif
#ifndef FAKE_SLOTS
#define FAKE_SLOTS 76
#endif

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

void CAT(verbs_register_driver_, FAKE_PABI)(const void *ops)
{
	(void)ops;
	printf("fake libibverbs: REGISTERED\n");
	fflush(stdout);
}

void verbs_set_ops(void *vctx, const void *ops)
{
	uintptr_t *priv = *(uintptr_t **)vctx;
	const uintptr_t *src = ops;
	for (int i = 0; i < FAKE_SLOTS; i++)
		if (src[i])
			priv[3 + i] = src[i];
}

void *_verbs_init_and_alloc_context(void *dev, int fd, size_t sz, void *off, uint32_t id)
{
	(void)dev, (void)fd, (void)sz, (void)off, (void)id;
	return NULL;
}

// verbs_qp.comp_mask at 360, as in v45 and later; VERBS_QP_EX is 2.
void *ibv_qp_to_qp_ex(void *qp)
{
	return (*(uint32_t *)((char *)qp + 360) & 2) ? qp : NULL;
}

void verbs_uninit_context(void *vctx)
{
	(void)vctx;
}
