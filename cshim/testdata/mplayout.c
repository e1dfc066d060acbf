// mplayout: prints, as JSON, the offsets and constants of libibverbs' public
// structs that cshim/testdata/mpfork.py needs to drive verbs through ctypes
// (built on the host against the same rdma-core's verbs.h as the guest's
// libibverbs: cshim/lazyvm.sh).
#include <stddef.h>
#include <stdio.h>

#include <infiniband/verbs.h>

#define OFF(t, f) printf("\"%s.%s\": %zu,\n", #t, #f, offsetof(struct t, f))
#define SIZE(t) printf("\"sizeof.%s\": %zu,\n", #t, sizeof(struct t))
#define K(c) KN(#c, c)
#define KN(n, c) printf("\"%s\": %lld,\n", n, (long long)(c))

int main(void)
{
	printf("{\n");
	SIZE(ibv_qp_init_attr);
	OFF(ibv_qp_init_attr, send_cq);
	OFF(ibv_qp_init_attr, recv_cq);
	OFF(ibv_qp_init_attr, cap.max_send_wr);
	OFF(ibv_qp_init_attr, cap.max_recv_wr);
	OFF(ibv_qp_init_attr, cap.max_send_sge);
	OFF(ibv_qp_init_attr, cap.max_recv_sge);
	OFF(ibv_qp_init_attr, qp_type);
	SIZE(ibv_qp_attr);
	OFF(ibv_qp_attr, qp_state);
	OFF(ibv_qp_attr, path_mtu);
	OFF(ibv_qp_attr, qp_access_flags);
	OFF(ibv_qp_attr, pkey_index);
	OFF(ibv_qp_attr, port_num);
	OFF(ibv_qp_attr, dest_qp_num);
	OFF(ibv_qp_attr, rq_psn);
	OFF(ibv_qp_attr, sq_psn);
	OFF(ibv_qp_attr, max_dest_rd_atomic);
	OFF(ibv_qp_attr, max_rd_atomic);
	OFF(ibv_qp_attr, min_rnr_timer);
	OFF(ibv_qp_attr, timeout);
	OFF(ibv_qp_attr, retry_cnt);
	OFF(ibv_qp_attr, rnr_retry);
	OFF(ibv_qp_attr, ah_attr.grh.dgid);
	OFF(ibv_qp_attr, ah_attr.grh.sgid_index);
	OFF(ibv_qp_attr, ah_attr.grh.hop_limit);
	OFF(ibv_qp_attr, ah_attr.is_global);
	OFF(ibv_qp_attr, ah_attr.port_num);
	OFF(ibv_qp, qp_num);
	OFF(ibv_context, ops.post_send);
	OFF(ibv_context, ops.poll_cq);
	SIZE(ibv_send_wr);
	OFF(ibv_send_wr, wr_id);
	OFF(ibv_send_wr, sg_list);
	OFF(ibv_send_wr, num_sge);
	OFF(ibv_send_wr, opcode);
	OFF(ibv_send_wr, send_flags);
	OFF(ibv_send_wr, wr.rdma.remote_addr);
	OFF(ibv_send_wr, wr.rdma.rkey);
	SIZE(ibv_wc);
	OFF(ibv_wc, wr_id);
	OFF(ibv_wc, status);
	OFF(ibv_mr, lkey);
	OFF(ibv_mr, rkey);
	SIZE(ibv_port_attr);
	OFF(ibv_port_attr, active_mtu);
	K(IBV_QPT_RC);
	K(IBV_QPS_INIT);
	K(IBV_QPS_RTR);
	K(IBV_QPS_RTS);
	K(IBV_WR_RDMA_WRITE);
	K(IBV_SEND_SIGNALED);
	KN("ACCESS_RW", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	KN("MASK_INIT", IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	KN("MASK_RTR", IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	KN("MASK_RTS", IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			       IBV_QP_MAX_QP_RD_ATOMIC);
	printf("\"end\": 0\n}\n");
	return 0;
}
